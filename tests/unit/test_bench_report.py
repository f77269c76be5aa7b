"""What `bench.report` writes: the turn rate the soak reads back, and the edge's verdict against its floor."""

from __future__ import annotations

from bench.report import TURNS_HEADING, drained_rate, edge_verdict, search_table, turn_rate_found


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


def test_a_floor_at_the_ladders_top_shows_no_ratio_met() -> None:
    # The floor passed the last step: its rate is a lower bound, so 0.5x of it proves nothing.
    assert edge_verdict(0.5, {"sustainable": 6000, "complete": True, "topped": True}) == (
        "not shown (the floor passed the ladder's top)"
    )
    assert edge_verdict(0.25, {"sustainable": 6000, "complete": True, "topped": True}) == "**missed**"
    assert edge_verdict(0.5, {"sustainable": 3000, "complete": True, "topped": False}) == "met"
    assert edge_verdict(None, {}) == "n/a"
    # The service sustained no step (no ratio) while the floor did.
    assert edge_verdict(None, {"sustainable": 3000, "complete": True, "topped": False}) == "**missed**"


def test_a_search_at_the_ladders_top_says_so() -> None:
    lines = search_table({"steps": [step(5000), step(6000)], "sustainable": 6000, "complete": True, "topped": True})
    assert "**sustainable: 6000 /s** (the ladder's top: the rate may be higher)" in lines


def test_the_rate_from_resumption_is_records_over_seconds_to_drain_and_none_if_never_drained() -> None:
    assert drained_rate({"records": 10008, "drained_s": 2.95}) == 3392.5
    assert drained_rate({"records": 10008, "drained_s": None}) is None
