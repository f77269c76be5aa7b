"""Shadow runs (decisions section 17): the result's arithmetic, and the log folded twice in memory, once as it
was and once with a candidate policy on the account's starts inside the window, each with history and
detector state as of its own time."""

from __future__ import annotations

from typing import Any

from callscreen.testing import Account, Harness
from domain.calls import Outcome
from domain.events import AnyEvent
from domain.policy import Policy
from domain.rules import MIN_MS, Rules
from domain.shadow import (
    DONE,
    PROGRESS,
    REQUESTED,
    RESULT,
    Compared,
    Request,
    ShadowRun,
    ShadowView,
    Side,
    Tally,
    chunks,
    csv_of,
)
from domain.times import format_ms
from infra.kafka import partition_for
from ingest.chart import BOTTOM, HEIGHT, TOP, daily_chart

NOW = 1_800_000_000_000
DAY_MS = 86_400_000
TO = "+14155552671"
ACCOUNT = Account("acct_shadow")
OTHER = Account("acct_other")


class Recording(Harness):
    """The harness, keeping every event it folded: the log a shadow run reads."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[AnyEvent] = []

    def fold_event(self, event: AnyEvent, key: str | None = None, forwards: bool = True) -> Outcome:
        self.log.append(event)
        return super().fold_event(event, key, forwards)


def side(action: str, score: float = 0.5, *reasons: str) -> Side:
    return Side(action, score, reasons)


def start(harness: Harness, call_id: str, at: int, caller: str, account: Account = ACCOUNT, **attrs: Any) -> Any:
    body = {"type": "call.started", "call_id": call_id, "to": TO, "from": caller, "at": format_ms(at), "attrs": attrs}
    status, answer = harness.post(account, body, at)
    assert status == 200, answer
    return answer


def shadow_of(log: list[AnyEvent], policy: Policy, since: int = NOW, until: int = NOW + DAY_MS) -> ShadowRun:
    request = Request(id="shd_1", account_id=ACCOUNT.id, since=since, until=until, policy=policy)
    run = ShadowRun(request, Rules(), lambda key: partition_for(key, 4))
    for event in log:
        run.fold(event)
    return run


# The arithmetic.


def test_the_matrix_labels_flipped_and_daily_rates_count_each_call_once() -> None:
    tally = Tally()
    tally.add(Compared("c1", NOW, side("allow"), side("allow"), "good"))
    tally.add(
        Compared("c3", NOW + DAY_MS + 5, side("review", 0.66, "attestation_failed"), side("reject", 0.66), "spam")
    )
    tally.add(Compared("c2", NOW + DAY_MS, side("review", 0.61), side("reject", 0.61)))
    tally.add(Compared("c4", NOW + DAY_MS, side("reject", 0.9), side("reject", 0.9), "spam"))
    summary = tally.summary()
    assert summary["calls"] == 4
    assert summary["matrix"] == {
        "allow": {"allow": 1, "review": 0, "reject": 0},
        "review": {"allow": 0, "review": 0, "reject": 2},
        "reject": {"allow": 0, "review": 0, "reject": 1},
    }
    assert summary["labels"]["allow"]["allow"] == {"spam": 0, "good": 1}
    assert summary["labels"]["review"]["reject"] == {"spam": 1, "good": 0}
    assert summary["labels"]["reject"]["reject"] == {"spam": 1, "good": 0}
    assert summary["labels"]["allow"]["reject"] == {"spam": 0, "good": 0}
    assert summary["daily"] == [
        {
            "date": "2027-01-15",
            "calls": 1,
            "live": {"allow": 1, "review": 0, "reject": 0},
            "shadow": {"allow": 1, "review": 0, "reject": 0},
        },
        {
            "date": "2027-01-16",
            "calls": 3,
            "live": {"allow": 0, "review": 2, "reject": 1},
            "shadow": {"allow": 0, "review": 0, "reject": 3},
        },
    ]
    flipped = tally.all_flipped()
    # In the order the calls started, whatever order they were added in.
    assert [f["call_id"] for f in flipped] == ["c2", "c3"]
    assert flipped[1] == {
        "call_id": "c3",
        "at": "2027-01-16T08:00:00.005Z",
        "from": "review",
        "to": "reject",
        "live": {"action": "review", "score": 0.66, "reasons": ["attestation_failed"]},
        "shadow": {"action": "reject", "score": 0.66, "reasons": []},
    }
    assert csv_of(flipped).splitlines() == [
        "call_id,at,from,to,live_score,shadow_score,live_reasons,shadow_reasons",
        "c2,2027-01-16T08:00:00.000Z,review,reject,0.61,0.61,,",
        "c3,2027-01-16T08:00:00.005Z,review,reject,0.66,0.66,attestation_failed,",
    ]


def test_the_flipped_calls_go_in_parts_and_the_view_puts_them_back_in_order() -> None:
    flipped = [{"call_id": f"c{i}"} for i in range(5)]
    parts = chunks(flipped, 2)
    assert parts == [flipped[0:2], flipped[2:4], flipped[4:5]]
    assert chunks([], 2) == [[]]
    view = ShadowView()
    asked = {"since": format_ms(NOW), "until": format_ms(NOW + DAY_MS), "policy": {"thresholds": {"reject": 0.6}}}
    view.apply({"kind": REQUESTED, "id": "shd_1", "account_id": ACCOUNT.id, **asked})
    assert view.running(ACCOUNT.id) is view.of(ACCOUNT.id, "shd_1") is not None
    assert view.of(OTHER.id, "shd_1") is None
    assert view.runs["shd_1"].policy == {"thresholds": {"reject": 0.6}}
    view.apply({"kind": PROGRESS, "id": "shd_1", "account_id": ACCOUNT.id, "progress": 0.25, "calls": 7})
    running = view.runs["shd_1"].body()
    assert (running["state"], running["progress"], running["calls"], running["flipped"]) == ("running", 0.25, 7, [])
    summary = {"calls": 9, "matrix": {}, "labels": {}, "daily": []}
    for number, part in reversed(list(enumerate(parts))):
        view.apply({"kind": RESULT, "id": "shd_1", "part": number, "summary": summary, "flipped": part})
    view.apply({"kind": DONE, "id": "shd_1", "account_id": ACCOUNT.id, "parts": len(parts)})
    done = view.runs["shd_1"].body()
    assert (done["state"], done["progress"], done["calls"]) == ("done", 1.0, 9)
    assert done["flipped"] == flipped
    assert view.running(ACCOUNT.id) is None


# The replay.


def test_the_live_policy_as_the_candidate_flips_nothing_and_the_replay_gives_the_live_answers() -> None:
    harness = Recording()
    answers = {}
    for i, attestation in enumerate(["A", "B", "C", "failed", "none", "failed"]):
        answers[f"c{i}"] = start(harness, f"c{i}", NOW + i * MIN_MS, f"+1919777{1000 + i}", attestation=attestation)
    answers["self"] = start(harness, "self", NOW + 10 * MIN_MS, TO)
    run = shadow_of(harness.log, Policy())
    assert run.calls() == 7
    assert not run.tally().flipped
    for call_id, compared in run.compared.items():
        live = answers[call_id]
        assert compared.live == compared.shadow == Side(live["action"], live["score"], tuple(live["reasons"]))


def test_a_lower_reject_threshold_flips_exactly_the_scores_between_the_two_thresholds() -> None:
    harness = Recording()
    scores = {}
    callers = {
        "plain": ("+19197771001", "A"),
        "failed": ("+19197771002", "failed"),  # 0.55
        "neighbour": ("+14155559001", "failed"),  # 0.55 and a neighbour's prefix: 0.6625
        "self": (TO, "A"),  # 0.60
    }
    for call_id, (caller, attestation) in callers.items():
        scores[call_id] = start(harness, call_id, NOW + MIN_MS, caller, attestation=attestation)["score"]
    # Another account's start inside the window keeps its own policy.
    start(harness, "theirs", NOW + MIN_MS, "+14155559001", account=OTHER, attestation="failed")
    run = shadow_of(harness.log, Policy(reject=0.6))
    flipped = {c.call_id for c in run.tally().flipped}
    assert flipped == {call_id for call_id, score in scores.items() if 0.6 <= score < 0.8} == {"neighbour", "self"}
    assert {c.shadow.action for c in run.tally().flipped} == {"reject"}
    assert "theirs" not in run.compared


def test_state_is_as_of_each_events_time_a_block_and_bad_history_after_the_window_are_not_inside_it() -> None:
    harness = Recording()
    caller = "+19197772001"
    inside = start(harness, "inside", NOW + MIN_MS, caller, attestation="C")
    assert inside["reasons"] == ["attestation_c"]
    # After the window: the caller's seventh call in ten minutes is blocked, and the owner labels it spam.
    after = NOW + DAY_MS + MIN_MS
    for i in range(7):
        answer = start(harness, f"after{i}", after + i * 1000, caller, attestation="C")
    assert "blocked" in answer["reasons"]
    assert harness.label(ACCOUNT, "inside", {"label": "spam"}, after + MIN_MS)[0] == 200
    again = start(harness, "again", after + 2 * MIN_MS, caller, attestation="C")
    assert "blocked" in again["reasons"] or "prior_bad" in again["reasons"]

    run = shadow_of(harness.log, Policy(review=0.3), until=NOW + DAY_MS)
    assert list(run.compared) == ["inside"]
    compared = run.compared["inside"]
    assert compared.live == Side("allow", 0.35, ("attestation_c",))
    assert compared.shadow == Side("review", 0.35, ("attestation_c",))
    # Its label, given after the window, is what the whole log says of it.
    assert run.tally().summary()["labels"]["allow"]["review"] == {"spam": 1, "good": 0}


def test_history_before_the_window_counts_in_both_replays() -> None:
    harness = Recording()
    caller = "+19197772002"
    start(harness, "before", NOW - DAY_MS, caller, attestation="C")
    assert harness.label(ACCOUNT, "before", {"label": "spam"}, NOW - DAY_MS + MIN_MS)[0] == 200
    inside = start(harness, "inside", NOW + MIN_MS, caller, attestation="C")
    assert "prior_bad" in inside["reasons"]
    run = shadow_of(harness.log, Policy(reject=0.6))
    assert list(run.compared) == ["inside"]
    compared = run.compared["inside"]
    assert compared.live == Side(inside["action"], inside["score"], tuple(inside["reasons"]))
    assert compared.shadow.reasons == compared.live.reasons and compared.shadow.action == "reject"


def test_the_candidates_rejections_reach_the_callers_later_calls_in_the_shadow_only() -> None:
    harness = Recording()
    caller = "+14155559002"
    first = start(harness, "first", NOW + MIN_MS, caller, attestation="failed")
    second = start(harness, "second", NOW + 30 * MIN_MS, caller, attestation="A")
    assert first["action"] == "review" and "prior_bad" not in second["reasons"]
    run = shadow_of(harness.log, Policy(reject=0.6))
    assert run.compared["first"].shadow.action == "reject"
    # The shadow's rejected start is the caller's bad history there, as it would have been live.
    assert "prior_bad" in run.compared["second"].shadow.reasons
    assert "prior_bad" not in run.compared["second"].live.reasons


def test_the_daily_chart_draws_each_days_reject_rate_under_both_policies() -> None:
    daily = [
        {
            "date": "2027-01-15",
            "calls": 4,
            "live": {"allow": 3, "review": 1, "reject": 0},
            "shadow": {"allow": 3, "review": 0, "reject": 1},
        },
        {
            "date": "2027-01-16",
            "calls": 2,
            "live": {"allow": 0, "review": 1, "reject": 1},
            "shadow": {"allow": 0, "review": 0, "reject": 2},
        },
    ]
    chart = daily_chart(daily)
    first, second = chart.days
    assert (first.label, first.live, first.shadow, second.live, second.shadow) == ("01-15", 0, 1, 1, 2)
    # Scaled to the highest rate, 100%: the second day's shadow bar is the whole plot, its live bar half.
    assert second.shadow_height == 2 * second.live_height == HEIGHT - BOTTOM - TOP
    assert first.live_height == 0 and first.shadow_height == second.shadow_height / 4
    assert [label for _, label in chart.ticks] == ["0%", "50%", "100%"]
