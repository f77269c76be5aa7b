"""Network evidence (decisions section 7): another account's history of a caller moves a score only when
at least two other accounts agree; the scoring account's own always counts; `prior` reports all of it."""

from __future__ import annotations

from typing import Any

from domain.rules import MIN_MS, SECOND_MS
from domain.times import format_ms
from tests.harness import Account, Harness

NOW = 1_800_000_000_000
TO = "+14155552671"
VICTIM = "+19197770801"


def start(call_id: str, at: int, caller: str = VICTIM, **fields: Any) -> dict[str, Any]:
    return {"type": "call.started", "call_id": call_id, "to": TO, "from": caller, "at": format_ms(at), **fields}


def bad_call(harness: Harness, account: Account, call_id: str, at: int, caller: str = VICTIM) -> None:
    """A call that settles at 70 or more: a failed attestation (0.55) answered and over in 5 s (+15)."""
    assert harness.post(account, start(call_id, at, caller, attrs={"attestation": "failed"}), at)[0] == 200
    end = {"type": "call.ended", "call_id": call_id, "at": format_ms(at + 5 * SECOND_MS)}
    assert harness.post(account, end, at + 5 * SECOND_MS)[1]["spam_score"] >= 70


def good_call(harness: Harness, account: Account, call_id: str, at: int, caller: str) -> None:
    assert harness.post(account, start(call_id, at, caller), at)[0] == 200
    end = {"type": "call.ended", "call_id": call_id, "at": format_ms(at + MIN_MS)}
    assert harness.post(account, end, at + MIN_MS)[1]["spam_score"] == 0


def test_one_tenant_cannot_make_a_number_bad_for_another_but_two_can() -> None:
    harness = Harness()
    poisoner, other, victim_owner = Account("acct_poison"), Account("acct_other"), Account("acct_scorer")
    for i in range(3):
        bad_call(harness, poisoner, f"p{i}", NOW + i * MIN_MS)
    status, answer = harness.post(victim_owner, start("s1", NOW + 10 * MIN_MS), NOW + 10 * MIN_MS)
    assert (status, answer["reasons"], answer["score"]) == (200, [], 0.0)
    assert (answer["checks"]["network_bad_accounts"], answer["checks"]["network_accounts"]) == (1, 1)
    # `prior` still reports every account's calls.
    assert answer["prior"] == {"points": 0, "calls": 3, "good": 0, "last": {"score": 92, "days": 0}}
    bad_call(harness, other, "o1", NOW + 11 * MIN_MS)
    answer = harness.post(victim_owner, start("s2", NOW + 12 * MIN_MS), NOW + 12 * MIN_MS)[1]
    assert (answer["reasons"], answer["score"], answer["checks"]["network_bad_accounts"]) == (["prior_bad"], 0.5, 2)


def test_the_accounts_own_bad_call_always_counts() -> None:
    harness = Harness()
    owner = Account("acct_owner")
    bad_call(harness, owner, "own-1", NOW)
    answer = harness.post(owner, start("own-2", NOW + MIN_MS), NOW + MIN_MS)[1]
    assert (answer["reasons"], answer["checks"]["network_bad_accounts"]) == (["prior_bad"], 0)


def test_one_tenant_cannot_launder_a_caller_with_short_good_calls() -> None:
    harness = Harness()
    launderer, scorer, second = Account("acct_launder"), Account("acct_scorer2"), Account("acct_second")
    caller = "+19197770901"
    for i in range(3):
        good_call(harness, launderer, f"g{i}", NOW + i * 2 * MIN_MS, caller)
    answer = harness.post(
        scorer, start("c1", NOW + 10 * MIN_MS, caller, attrs={"attestation": "C"}), NOW + 10 * MIN_MS
    )[1]
    assert (answer["reasons"], answer["score"], answer["checks"]["network_good_accounts"]) == (
        ["attestation_c"],
        0.35,
        1,
    )
    good_call(harness, second, "g9", NOW + 11 * MIN_MS, caller)
    answer = harness.post(
        scorer, start("c2", NOW + 13 * MIN_MS, caller, attrs={"attestation": "C"}), NOW + 13 * MIN_MS
    )[1]
    assert (answer["reasons"], answer["score"]) == (["attestation_c", "prior_good"], 0.175)


def test_a_caller_is_fresh_until_the_account_or_two_other_accounts_saw_it() -> None:
    harness = Harness()
    first, second, scorer = Account("acct_first"), Account("acct_second2"), Account("acct_fresh")
    caller = "+19197770999"
    good_call(harness, first, "f1", NOW, caller)
    assert harness.view.caller_for(scorer.id, caller).first_seen is None
    assert harness.view.caller_for(first.id, caller).first_seen == NOW
    good_call(harness, second, "f2", NOW + 5 * MIN_MS, caller)
    assert harness.view.caller_for(scorer.id, caller).first_seen == NOW + 5 * MIN_MS
    # For one of the two, its own call and the one other account's: its own first.
    assert harness.view.caller_for(first.id, caller).first_seen == NOW


def test_one_tenant_calling_a_range_first_does_not_hide_its_cluster_from_another() -> None:
    harness = Harness()
    launderer, target = Account("acct_pre"), Account("acct_target")
    callers = [f"+1919555{i:04d}" for i in range(10)]
    for i, caller in enumerate(callers):
        # Eleven minutes apart, so that the launderer's own detectors see no run of numbers.
        at = NOW - 3 * 3_600_000 + i * 11 * MIN_MS
        assert harness.post(launderer, start(f"pre-{i}", at, caller), at)[0] == 200
    for i, caller in enumerate(callers):
        at = NOW + i * MIN_MS
        assert harness.post(target, start(f"t{i}", at, caller), at)[0] == 200
    clusters = [a for a in harness.alerts if a.type == "number.prefix_cluster" and a.account_id == target.id]
    assert [(a.data["pattern"], a.data["count"]) for a in clusters] == [("+19195550*", 10)]
