"""The soak's default rate is read back from the benchmarks page `bench.report` writes."""

from __future__ import annotations

from bench.report import TURNS_HEADING, search_table, turn_rate_found


def page(search: dict[str, object] | None) -> str:
    starts = "## `call.started`: sustainable rate\n\n**sustainable: 200 /s**\n"
    return "\n".join(["# Benchmarks", "", TURNS_HEADING, "", *search_table(search), starts])


def step(rate: float) -> dict[str, object]:
    summary = {"statuses": {"200": 10}, "errors": 0, "count": 10, "p50_ms": 1.0, "p99_ms": 2.0}
    return {"rate": rate, "offered": 10, "throughput_ok_per_s": rate, "all": summary | {"p999_ms": 2.0, "max_ms": 3.0}}


def test_the_turn_rate_is_the_one_under_the_turn_heading() -> None:
    found = page({"steps": [step(500), step(750)], "sustainable": 750, "complete": True})
    assert turn_rate_found(found) == 750.0


def test_a_search_that_sustained_nothing_names_no_rate() -> None:
    # The starts section below still names 200 /s; it is not the turn rate.
    assert turn_rate_found(page({"steps": [step(25)], "sustainable": None, "complete": True})) is None
    assert turn_rate_found(page(None)) is None
