"""The contract's corrections, each on the pure folds: attrs kept, late reports placed, quiet imports in
`prior`, `data.prior` on alerts, whose interruption counts, and a turn placed by its `at` however late."""

from __future__ import annotations

from typing import Any

import msgspec

from callscreen.testing import Account, Harness
from domain import live
from domain.calls import CallState
from domain.events import Interruption, Tick, TurnEnded, TurnStarted
from domain.facts import CallSettled
from domain.features import FeatureView
from domain.rules import DAY_MS, HOUR_MS, MIN_MS, SECOND_MS, LiveRules, ScoringRules
from domain.scoring import prior_good
from domain.store import MemoryStore
from domain.times import format_ms

NOW = 1_800_000_000_000
GUARD = Account("acct_fix")
TO = "+14155552671"
CALLER = "+19197770601"


def start(call_id: str, at: int, caller: str = CALLER, **fields: Any) -> dict[str, Any]:
    return {"type": "call.started", "call_id": call_id, "to": TO, "from": caller, "at": format_ms(at), **fields}


def record(harness: Harness, call_id: str) -> CallState:
    found = harness.calls[f"{GUARD.id}:{call_id}"]
    assert isinstance(found, CallState)
    return found


def test_unknown_keys_inside_geo_perf_and_tokens_are_kept_within_the_bound() -> None:
    harness = Harness()
    attrs = {
        "geo": {"zip": "10001", "metro": "NYC"},
        "perf": {"turn_ms": 420, "p95_ms": 900},
        "tokens": {"in": 10, "reasoning": 4},
        "vendor": "x",
    }
    assert harness.post(GUARD, start("k1", NOW, attrs=attrs), NOW)[0] == 200
    assert record(harness, "k1").attrs == attrs
    # The named keys are still checked, and unknown ones count toward the same 2,048 bytes.
    assert harness.post(GUARD, start("k2", NOW, attrs={"geo": {"zip": 5}}), NOW) == (
        400,
        {"error": "invalid_field", "field": "attrs.geo.zip", "limit": 128},
    )
    huge = {"geo": {"metro": "m" * 1500}, "vendor": "v" * 1000}
    assert harness.post(GUARD, start("k3", NOW, attrs=huge), NOW) == (
        400,
        {"error": "invalid_field", "field": "attrs", "limit": 2048},
    )


def test_forwarded_from_is_a_phone_number() -> None:
    harness = Harness()
    assert harness.post(GUARD, start("f1", NOW, attrs={"forwarded_from": "not a number"}), NOW) == (
        400,
        {"error": "invalid_field", "field": "attrs.forwarded_from"},
    )
    status, answer = harness.post(GUARD, start("f2", NOW, attrs={"forwarded_from": "0044 20 7946 0958"}), NOW)
    assert (status, answer["reasons"]) == (200, ["forwarded"])
    assert record(harness, "f2").attrs == {"forwarded_from": "+442079460958"}


def test_a_call_that_exists_takes_its_late_reports_whatever_their_age() -> None:
    harness = Harness()
    yesterday = NOW - DAY_MS - HOUR_MS
    assert harness.post(GUARD, start("late", yesterday), yesterday)[0] == 200
    turn = {"type": "turn.started", "call_id": "late", "role": "user", "at": format_ms(yesterday + SECOND_MS)}
    assert harness.post(GUARD, turn, NOW)[1]["user_turns"] == 1
    ended = {"type": "call.ended", "call_id": "late", "at": format_ms(yesterday + MIN_MS)}
    assert harness.post(GUARD, ended, NOW) == (200, {"call_id": "late", "duration_s": 60, "spam_score": 0})


def test_only_a_live_start_over_seven_days_old_is_refused() -> None:
    harness = Harness()
    assert harness.post(GUARD, start("six", NOW - 6 * DAY_MS), NOW)[0] == 200
    assert harness.post(GUARD, start("eight", NOW - 8 * DAY_MS), NOW) == (
        400,
        {"error": "invalid_at", "max_age_days": 7, "hint": "use quiet: true to import history"},
    )
    assert harness.post(GUARD, start("eight", NOW - 8 * DAY_MS, quiet=True), NOW)[0] == 200


def imported(harness: Harness, call_id: str, at: int, **ended: Any) -> None:
    assert harness.post(GUARD, start(call_id, at, quiet=True), NOW)[0] == 200
    end = {"type": "call.ended", "call_id": call_id, "at": format_ms(at + MIN_MS), **ended}
    assert harness.post(GUARD, end, NOW)[0] == 200


def test_the_accounts_own_quiet_imports_count_in_prior_and_nowhere_else() -> None:
    harness = Harness()
    for i in range(3):
        imported(harness, f"q{i}", NOW - 3 * DAY_MS + i * HOUR_MS)
    status, answer = harness.post(GUARD, start("live", NOW, attrs={"attestation": "C"}), NOW)
    assert status == 200
    assert answer["prior"] == {"points": 0, "calls": 3, "good": 3, "last": {"score": 0, "days": 2}}
    assert (answer["score"], answer["reasons"]) == (0.175, ["attestation_c", "prior_good"])
    # Another account scoring the same caller sees none of it.
    other = Account("acct_other")
    answer = harness.post(other, start("theirs", NOW + SECOND_MS, attrs={"attestation": "C"}), NOW)[1]
    # Only the live call reached the network: the imports stay the importing account's.
    assert answer["prior"] == {"points": 0, "calls": 1, "good": 0, "last": {"score": 18, "days": 0}}


def test_a_quiet_import_that_settled_as_spam_is_prior_bad() -> None:
    harness = Harness()
    bad = "+19197770999"
    assert harness.post(
        GUARD, start("q-bad", NOW - DAY_MS, caller=bad, quiet=True, attrs={"attestation": "failed"}), NOW
    )
    end = {"type": "call.ended", "call_id": "q-bad", "at": format_ms(NOW - DAY_MS + 5 * SECOND_MS)}
    assert harness.post(GUARD, end, NOW)[1]["spam_score"] == 70
    answer = harness.post(GUARD, start("after", NOW, caller=bad), NOW)[1]
    assert answer["reasons"] == ["prior_bad"]


def settled(n: int, spam: int) -> CallSettled:
    return CallSettled(
        id=f"end-{n}",
        account_id=GUARD.id,
        number=TO,
        at=NOW + n * MIN_MS,
        call_id=f"s{n}",
        caller=CALLER,
        duration_s=60,
        spam_score=spam,
        cost=None,
        quiet=False,
    )


def test_prior_good_takes_an_earlier_call_at_seventy_but_none_above() -> None:
    for last, relief in ((70, True), (71, False)):
        view = FeatureView(MemoryStore(), ScoringRules())
        for n, spam in enumerate((10, 20, 29, last)):
            assert view.apply(settled(n, spam))
        history = view.caller_for(GUARD.id, CALLER).evidence
        assert (history.good, history.bad, history.above) == (3, 1, 0 if relief else 1)
        assert prior_good(history, ScoringRules()) is relief


def test_alerts_about_a_caller_with_a_record_carry_its_prior() -> None:
    harness = Harness()
    imported(harness, "before", NOW - 2 * DAY_MS)
    for i in range(6):
        assert harness.post(GUARD, start(f"r{i}", NOW + i * MIN_MS), NOW + i * MIN_MS)[0] == 200
    rate = [a for a in harness.alerts if a.type == "caller.rate_exceeded"]
    assert len(rate) == 1
    assert rate[0].data["prior"] == {"score": 0, "days": 0}
    user = {"type": "turn.ended", "call_id": "r5", "role": "user", "words": 130, "at": format_ms(NOW + 6 * MIN_MS)}
    harness.post(GUARD, user, NOW + 6 * MIN_MS)
    suspicious = [a for a in harness.alerts if a.type == "call.suspicious"]
    assert [a.data["prior"] for a in suspicious] == [{"score": 0, "days": 0}]
    # A caller with no record: no `prior` in the alert.
    fresh = "+13125550111"
    harness.post(GUARD, start("fresh", NOW + 7 * MIN_MS, caller=fresh), NOW + 7 * MIN_MS)
    words = {"type": "turn.ended", "call_id": "fresh", "role": "user", "words": 130, "at": format_ms(NOW + 8 * MIN_MS)}
    harness.post(GUARD, words, NOW + 8 * MIN_MS)
    assert "prior" not in [a for a in harness.alerts if a.type == "call.suspicious"][-1].data


RULES = LiveRules()
START = 1_000_000


def fold_all(steps: list[live.Step]) -> live.LiveState:
    state = live.LiveState()
    for step in steps:
        state = live.fold(state, as_event(step), START, 0.0, RULES).state
    return state


def as_event(step: live.Step) -> Any:
    kinds = {"turn.started": TurnStarted, "turn.ended": TurnEnded, "interruption": Interruption}
    fields: dict[str, Any] = {"role": step.role or "user", "turn": step.turn, "words": step.words}
    if step.interrupted:
        fields["interrupted"] = True
    return kinds[step.type](id=step.id, account_id="acct_x", call_id="c1", at=step.at, **fields)


def test_only_an_agent_turn_cut_off_is_the_callers_interruption() -> None:
    agent_cut = [live.Step("turn.ended", START + i * SECOND_MS, f"a{i}", "agent", interrupted=True) for i in range(6)]
    user_cut = [live.Step("turn.ended", START + i * SECOND_MS, f"u{i}", "user", interrupted=True) for i in range(6)]
    assert (fold_all(agent_cut).interruptions, fold_all(agent_cut).flags) == (6, ("barge_storm",))
    assert (fold_all(user_cut).interruptions, fold_all(user_cut).flags) == (0, ())


def test_a_start_older_than_the_kept_events_pairs_with_its_end() -> None:
    end = live.Step("turn.ended", START + 3 * SECOND_MS, "end", "user", turn=0, words=5)
    begin = live.Step("turn.started", START + SECOND_MS, "begin", "user", turn=0)
    agent = [
        live.Step("turn.ended", START + (10 + i) * SECOND_MS, f"a{i}", "agent", turn=i + 1, words=2)
        for i in range(live.RECENT_KEEP + 5)
    ]
    in_order = fold_all([begin, end, *agent])
    late = fold_all([end, *agent, begin])
    assert late.horizon is not None and begin.order < late.horizon.order
    assert (
        (late.user_turns, late.current.user_talk_s) == (in_order.user_turns, in_order.current.user_talk_s) == (1, 2.0)
    )
    assert msgspec.structs.replace(late.current, said=()) == msgspec.structs.replace(in_order.current, said=())


def test_a_flag_stays_when_a_walk_again_would_not_trip_it() -> None:
    agent = live.Step("turn.started", START + 2 * SECOND_MS, "agent", "agent")
    tick = live.Step("tick", START + 61 * SECOND_MS, "tick")
    caller = live.Step("turn.started", START + 30 * SECOND_MS, "caller", "user")
    state = live.fold(live.LiveState(), as_event(agent), START, 0.0, RULES).state
    state = live.fold(state, Tick(id="tick", account_id="acct_x", call_id="c1", at=tick.at), START, 0.0, RULES).state
    assert state.flags == ("silent_listener",)
    # The caller's turn, reported late, lies before the tick: a walk again finds no silence, but the flag
    # was already answered and alerted on.
    state = live.fold(state, as_event(caller), START, 0.0, RULES).state
    assert state.flags == ("silent_listener",)
    assert state.user_turns == 1
