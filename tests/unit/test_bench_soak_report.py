"""The overload table's CPU column: each process's mean over the samples inside a window."""

from __future__ import annotations

from bench.soak_report import window_cpu


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
