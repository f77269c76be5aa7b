"""How the bench times a fold round: the committed position's slope inside the backlog, and the median."""

from __future__ import annotations

from bench.run import fold_summary
from bench.service import commit_rate, fold_rates


def test_the_rate_runs_between_the_first_and_last_commit_inside_the_backlog() -> None:
    # Positions first seen: before the backlog (100), three commits inside it, then its end (1100) after
    # a long last flush that must not count.
    steps = [(0.0, 100), (0.4, 300), (0.9, 550), (1.4, 800), (3.0, 1100)]
    assert commit_rate(steps, start=100, end=1100) == 500.0


def test_a_commit_of_records_before_the_backlog_is_not_its_first() -> None:
    # The worker had not committed all it folded before the pause: its commit of those is not a step of the fold.
    steps = [(0.0, 90), (0.2, 100), (0.6, 400), (1.2, 700), (2.0, 1000)]
    assert commit_rate(steps, start=100, end=1000) == 500.0


def test_fewer_than_two_commits_inside_give_no_rate() -> None:
    assert commit_rate([(0.0, 100), (0.5, 600), (1.0, 1100)], start=100, end=1100) is None
    assert commit_rate([(0.0, 100), (1.0, 1100)], start=100, end=1100) is None


def test_the_verdict_is_the_median_of_each_rounds_ratio_to_its_own_faust_run() -> None:
    append = {"calls": 10, "records": 20, "per_s": 1000.0}

    def one(worker: float | None, faust: float) -> dict[str, object]:
        return {"append": append, "per_s": worker, "faust": {"per_s": faust}}

    # A slow minute halves both sides of round 2: its ratio is the others', not the lowest worker rate's.
    summary = fold_summary([one(4000.0, 2000.0), one(2000.0, 1000.0), one(5000.0, 2000.0)])
    assert summary["per_s"] == 4000.0
    assert summary["stock_ratio"] == 2.0
    # A round with no rate (too few commits inside) counts in neither median.
    summary = fold_summary([one(None, 2000.0), one(3000.0, 2000.0), one(4500.0, 2000.0)])
    assert summary["per_s"] == 3750.0
    assert summary["stock_ratio"] == 1.88


def test_a_round_runs_until_the_facts_of_its_events_are_folded_too() -> None:
    # The events' slope inside the backlog is 500 records a second; the detector ends its facts' fold
    # (1100 of them: a start's or end's, and the detectors' own) half a second after the events' last commit.
    events = [(0.0, 0), (0.5, 300), (1.5, 800), (2.0, 1000)]
    facts = [(0.0, 50), (1.8, 600), (2.2, 900), (2.5, 1150)]
    assert fold_rates(events, 0, 1000, facts, 1150) == {"events_per_s": 500.0, "per_s": 350.0}
    # Facts folded by the events' last commit: the fold's rate still counts the last flush the slope leaves out.
    facts = [(0.0, 50), (1.0, 600), (2.0, 1150)]
    assert fold_rates(events, 0, 1000, facts, 1150) == {"events_per_s": 500.0, "per_s": 466.7}
    # The end of either topic not seen (a time-out): no rate of the fold's own.
    assert fold_rates(events, 0, 1000, [(0.0, 50), (2.0, 1100)], 1150)["per_s"] is None
    assert fold_rates(events[:3], 0, 1000, facts, 1150)["per_s"] is None
    assert fold_rates(events, 0, 1000, [], None)["per_s"] is None
