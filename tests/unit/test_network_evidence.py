"""Network evidence (decisions section 7): another account's history of a caller moves a score only when
at least two other accounts agree; the scoring account's own always counts; `prior` reports all of it."""

from __future__ import annotations

from typing import Any

from callscreen.testing import Account, Harness
from domain import keys
from domain.rules import MIN_MS, SECOND_MS, Rules, ScoringRules
from domain.times import format_ms

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


# Network evidence from path tokens (docs/rules.md, Network evidence): an account whose agreeing history only
# its ingest token or a gate token posted counts for `scoring_network_token_weight` (0.5) of an account.


def token(account_id: str, credential: str = "ingest") -> Account:
    return Account(account_id, credential=credential)


def network_checks(answer: dict[str, Any]) -> tuple[int, int, int, int]:
    checks = answer["checks"]
    return (
        checks["network_bad_accounts"],
        checks["network_bad_token_accounts"],
        checks["network_good_accounts"],
        checks["network_good_token_accounts"],
    )


def test_two_token_only_accounts_do_not_make_a_caller_bad_for_a_third() -> None:
    harness = Harness()
    bad_call(harness, token("acct_tok1"), "t1", NOW)
    bad_call(harness, token("acct_tok2", "gate"), "t2", NOW + MIN_MS)
    answer = harness.post(Account("acct_third"), start("s1", NOW + 10 * MIN_MS), NOW + 10 * MIN_MS)[1]
    assert (answer["reasons"], answer["score"], answer["action"]) == ([], 0.0, "allow")
    assert network_checks(answer) == (2, 2, 0, 0)
    # `prior` still reports both calls.
    assert answer["prior"] == {"points": 0, "calls": 2, "good": 0, "last": {"score": 70, "days": 0}}


def test_token_only_accounts_count_half_beside_a_keys() -> None:
    harness = Harness()
    bad_call(harness, Account("acct_key1"), "k1", NOW)
    bad_call(harness, token("acct_tok1"), "t1", NOW + MIN_MS)
    # One account and one half: short of two.
    answer = harness.post(Account("acct_third"), start("s1", NOW + 10 * MIN_MS), NOW + 10 * MIN_MS)[1]
    assert (answer["reasons"], answer["score"], network_checks(answer)) == ([], 0.0, (2, 1, 0, 0))
    bad_call(harness, token("acct_tok2"), "t2", NOW + 11 * MIN_MS)
    answer = harness.post(Account("acct_third"), start("s2", NOW + 12 * MIN_MS), NOW + 12 * MIN_MS)[1]
    assert (answer["reasons"], answer["score"], network_checks(answer)) == (["prior_bad"], 0.5, (3, 2, 0, 0))


def test_four_token_only_accounts_make_two() -> None:
    harness = Harness()
    for i in range(3):
        bad_call(harness, token(f"acct_tok{i}"), f"t{i}", NOW + i * MIN_MS)
    answer = harness.post(Account("acct_third"), start("s1", NOW + 10 * MIN_MS), NOW + 10 * MIN_MS)[1]
    assert (answer["reasons"], answer["score"], network_checks(answer)) == ([], 0.0, (3, 3, 0, 0))
    bad_call(harness, token("acct_tok3"), "t3", NOW + 11 * MIN_MS)
    answer = harness.post(Account("acct_third"), start("s2", NOW + 12 * MIN_MS), NOW + 12 * MIN_MS)[1]
    assert (answer["reasons"], answer["score"], network_checks(answer)) == (["prior_bad"], 0.5, (4, 4, 0, 0))


def test_an_account_whose_key_also_posted_a_bad_call_counts_in_full() -> None:
    harness = Harness()
    mixed = "acct_mixed"
    bad_call(harness, Account(mixed), "m1", NOW)
    bad_call(harness, token(mixed), "m2", NOW + MIN_MS)
    # And the other way round: the token first, then the key.
    bad_call(harness, token("acct_mixed2"), "n1", NOW + 2 * MIN_MS)
    bad_call(harness, Account("acct_mixed2"), "n2", NOW + 3 * MIN_MS)
    answer = harness.post(Account("acct_third"), start("s1", NOW + 10 * MIN_MS), NOW + 10 * MIN_MS)[1]
    assert (answer["reasons"], answer["score"], network_checks(answer)) == (["prior_bad"], 0.5, (2, 0, 0, 0))


def test_a_token_bad_call_after_a_keys_good_one_is_the_tokens_alone() -> None:
    harness = Harness()
    mixed = "acct_mixed"
    good_call(harness, Account(mixed), "m1", NOW, VICTIM)
    bad_call(harness, token(mixed), "m2", NOW + 2 * MIN_MS)
    bad_call(harness, Account("acct_key2"), "k2", NOW + 3 * MIN_MS)
    answer = harness.post(Account("acct_third"), start("s1", NOW + 10 * MIN_MS), NOW + 10 * MIN_MS)[1]
    # The mixed account's good calls are its key's: that agreement counts in full, its bad one by half.
    assert (answer["reasons"], answer["score"], network_checks(answer)) == ([], 0.0, (2, 1, 1, 0))


def test_a_token_end_of_a_keys_call_makes_its_settled_score_the_tokens() -> None:
    harness = Harness()
    account = "acct_split"
    # Started with the key (0.55: not past reject), ended through the token: settled at 70.
    assert harness.post(Account(account), start("x1", NOW, attrs={"attestation": "failed"}), NOW)[0] == 200
    end = {"type": "call.ended", "call_id": "x1", "at": format_ms(NOW + 5 * SECOND_MS)}
    assert harness.post(token(account), end, NOW + 5 * SECOND_MS)[1]["spam_score"] == 70
    bad_call(harness, Account("acct_key2"), "k2", NOW + MIN_MS)
    answer = harness.post(Account("acct_third"), start("s1", NOW + 10 * MIN_MS), NOW + 10 * MIN_MS)[1]
    assert (answer["reasons"], answer["score"], network_checks(answer)) == ([], 0.0, (2, 1, 0, 0))


def test_two_token_only_accounts_good_calls_give_no_relief() -> None:
    harness = Harness()
    caller = "+19197770902"
    for n, account in enumerate(("acct_tok1", "acct_tok2")):
        for i in range(2):
            good_call(harness, token(account), f"g{n}{i}", NOW + (n * 2 + i) * 2 * MIN_MS, caller)
    scorer = Account("acct_scorer")
    attested_c = start("c1", NOW + 20 * MIN_MS, caller, attrs={"attestation": "C"})
    answer = harness.post(scorer, attested_c, NOW + 20 * MIN_MS)[1]
    assert (answer["reasons"], answer["score"], network_checks(answer)) == (["attestation_c"], 0.35, (0, 0, 2, 2))
    good_call(harness, Account("acct_key1"), "k1", NOW + 21 * MIN_MS, caller)
    attested_c = start("c2", NOW + 30 * MIN_MS, caller, attrs={"attestation": "C"})
    answer = harness.post(scorer, attested_c, NOW + 30 * MIN_MS)[1]
    assert (answer["reasons"], answer["score"], network_checks(answer)) == (
        ["attestation_c", "prior_good"],
        0.175,
        (0, 0, 3, 2),
    )


def test_the_accounts_own_token_history_always_counts() -> None:
    harness = Harness()
    bad_call(harness, token("acct_owner"), "own-1", NOW)
    answer = harness.post(Account("acct_owner"), start("own-2", NOW + MIN_MS), NOW + MIN_MS)[1]
    assert (answer["reasons"], answer["score"], network_checks(answer)) == (["prior_bad"], 0.5, (0, 0, 0, 0))


def test_a_token_weight_of_one_counts_tokens_as_keys() -> None:
    harness = Harness(Rules(scoring=ScoringRules(network_token_weight=1.0)))
    bad_call(harness, token("acct_tok1"), "t1", NOW)
    bad_call(harness, token("acct_tok2"), "t2", NOW + MIN_MS)
    answer = harness.post(Account("acct_third"), start("s1", NOW + 10 * MIN_MS), NOW + 10 * MIN_MS)[1]
    assert (answer["reasons"], answer["score"], network_checks(answer)) == (["prior_bad"], 0.5, (2, 2, 0, 0))


def test_a_view_folded_before_the_credential_counts_its_accounts_as_keys() -> None:
    harness = Harness()
    bad_call(harness, Account("acct_old1"), "o1", NOW)
    bad_call(harness, Account("acct_old2"), "o2", NOW + MIN_MS)
    store = harness.view.store
    history = store.get(keys.View.history(VICTIM))
    del history["token_agree"]
    store.put(keys.View.history(VICTIM), history)
    # An account only its keys posted for keeps no `keyed` part: its rows are as they were before too.
    assert [("keyed" in store.get(keys.View.own(a, VICTIM))) for a in ("acct_old1", "acct_old2")] == [False, False]
    answer = harness.post(Account("acct_third"), start("s1", NOW + 10 * MIN_MS), NOW + 10 * MIN_MS)[1]
    assert (answer["reasons"], answer["score"], network_checks(answer)) == (["prior_bad"], 0.5, (2, 0, 0, 0))
    # A token's call folded into an old row: the row's earlier calls stay its key's.
    bad_call(harness, token("acct_old1"), "o3", NOW + 11 * MIN_MS)
    answer = harness.post(Account("acct_third"), start("s2", NOW + 12 * MIN_MS), NOW + 12 * MIN_MS)[1]
    assert (answer["reasons"], answer["score"], network_checks(answer)) == (["prior_bad"], 0.5, (2, 0, 0, 0))
