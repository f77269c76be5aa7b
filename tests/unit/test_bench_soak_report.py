"""The overload section: the table's CPU column (each process's mean over the samples inside a window), the warm-up."""

from __future__ import annotations

from bench.soak_report import warmup_line, window_cpu


def test_means_the_samples_inside_the_window_only() -> None:
    samples = [
        (0.0, {"edge": 40.0, "worker": 90.0, "broker": 30.0, "alerting": 1.0}),
        (4.9, {"edge": 60.0, "worker": 70.0, "broker": 50.0, "alerting": 3.0}),
        (5.0, {"edge": 99.0, "worker": 99.0, "broker": 99.0, "alerting": 99.0}),
    ]
    assert window_cpu(samples, 0.0, 5.0) == "50 / 80 / 40 / 2"
    assert window_cpu(samples, 5.0, 10.0) == "99 / 99 / 99 / 99"


def test_a_process_never_sampled_shows_a_dash() -> None:
    assert window_cpu([(1.0, {"edge": 12.4, "worker": 20.6})], 0.0, 5.0) == "12 / 21 / — / —"
    assert window_cpu([], 0.0, 5.0) == "— / — / — / —"


def test_the_warm_up_line_gives_its_rate_its_whole_and_each_window() -> None:
    warmup = {
        "rate": 1000.0,
        "seconds": 15.0,
        "all": {"p50_ms": 4.1, "p99_ms": 61.2, "errors": 0},
        "windows": [{"p99_ms": 120.5}, {"p99_ms": 30.0}, {"p99_ms": None}],
    }
    assert warmup_line(warmup) == (
        "- Before it, 15 s of full calls at 1000 events/s, not measured (a fresh broker's first seconds):"
        " p50 4.1 ms, p99 61.2 ms, 0 errors; p99 per 5 s: 120.5 / 30.0 / None ms."
    )
