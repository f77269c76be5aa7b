"""An account's scoring policy (decisions sections 7 and 17): thresholds, weights and switches per account,
laid over the deployment's defaults, checked field by field, and kept on the accounts record and each start."""

from __future__ import annotations

from typing import Any

import pytest

from callscreen.testing import Account, Harness
from domain import commands
from domain.accounts import Account as AccountRecord
from domain.accounts import evolve
from domain.commands import Refused
from domain.policy import Policy, PolicyError, parse_policy, policy_body, record_policy, scoring_for
from domain.rules import ScoringRules
from domain.times import format_ms

NOW = 1_800_000_000_000
TO = "+14155552671"
CALLER = "+19197770801"
RULES = ScoringRules()


def started(harness: Harness, account: Account, call_id: str, **attrs: Any) -> dict[str, Any]:
    body = {"type": "call.started", "call_id": call_id, "to": TO, "from": CALLER, "at": format_ms(NOW), "attrs": attrs}
    status, answer = harness.post(account, body, NOW)
    assert status == 200, answer
    return dict(answer)


def test_no_policy_keeps_the_defaults() -> None:
    assert scoring_for(RULES, None) is RULES
    assert scoring_for(RULES, Policy()) is RULES
    assert policy_body(None, RULES) == {
        "thresholds": {"review": 0.5, "reject": 0.8},
        "weights": dict(sorted(RULES.weights.items())),
        "off": [],
    }


def test_a_policy_overrides_only_what_it_names() -> None:
    policy = parse_policy({"thresholds": {"reject": 0.6}, "weights": {"forwarded": 0.2}, "off": ["prior_good"]}, RULES)
    rules = scoring_for(RULES, policy)
    assert (rules.review, rules.reject) == (0.5, 0.6)
    assert rules.weights["forwarded"] == 0.2
    assert rules.weights["attestation_failed"] == 0.55
    assert rules.off == frozenset({"prior_good"})
    assert scoring_for(RULES, policy) is rules


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ([], "policy"),
        ({"thresholds": {"review": 0.5}, "extra": 1}, "policy.extra"),
        ({"thresholds": {"middle": 0.5}}, "policy.thresholds"),
        ({"thresholds": {"review": 1.5}}, "policy.thresholds.review"),
        ({"thresholds": {"reject": -0.1}}, "policy.thresholds.reject"),
        ({"thresholds": {"reject": True}}, "policy.thresholds.reject"),
        ({"thresholds": {"review": 0.9}}, "policy.thresholds"),
        ({"thresholds": {"review": 0.7, "reject": 0.6}}, "policy.thresholds"),
        ({"weights": {"blocked": 0.5}}, "policy.weights.blocked"),
        ({"weights": {"forwarded": "high"}}, "policy.weights.forwarded"),
        ({"weights": {"forwarded": None}}, "policy.weights.forwarded"),
        ({"weights": []}, "policy.weights"),
        ({"off": ["trusted"]}, "policy.off"),
        ({"off": "forwarded"}, "policy.off"),
    ],
)
def test_a_bad_policy_names_its_field(body: Any, field: str) -> None:
    with pytest.raises(PolicyError) as refused:
        parse_policy(body, RULES)
    assert refused.value.field == field


def test_a_lower_threshold_changes_the_action_and_the_thresholds_answered() -> None:
    harness = Harness()
    live = Account("acct_live000000000001")
    strict = Account("acct_strict0000000001", policy=parse_policy({"thresholds": {"reject": 0.5}}, RULES))
    assert started(harness, live, "c-1", attestation="failed")["action"] == "review"
    answer = started(harness, strict, "c-2", attestation="failed")
    assert (answer["score"], answer["action"]) == (0.55, "reject")
    assert answer["thresholds"] == {"review": 0.5, "reject": 0.5}


def test_a_reason_switched_off_neither_moves_the_score_nor_shows() -> None:
    harness = Harness()
    account = Account("acct_off0000000000001", policy=parse_policy({"off": ["attestation_failed"]}, RULES))
    answer = started(harness, account, "c-1", attestation="failed", forwarded_from="+14155550000")
    assert (answer["score"], answer["reasons"]) == (0.05, ["forwarded"])


def test_a_weight_of_zero_drops_the_reason_and_a_new_weight_reorders_them() -> None:
    harness = Harness()
    zero = Account("acct_zero000000000001", policy=parse_policy({"weights": {"forwarded": 0}}, RULES))
    answer = started(harness, zero, "c-1", attestation="C", forwarded_from="+14155550000")
    assert (answer["score"], answer["reasons"]) == (0.35, ["attestation_c"])
    heavy = Account("acct_heavy00000000001", policy=parse_policy({"weights": {"forwarded": 0.5}}, RULES))
    answer = started(harness, heavy, "c-2", attestation="C", forwarded_from="+14155550000")
    assert (answer["score"], answer["reasons"]) == (0.675, ["forwarded", "attestation_c"])


def test_the_record_keeps_the_policy_and_an_empty_one_restores_the_defaults() -> None:
    account = AccountRecord(id="acct_a000000000000001", name="", plan="watch", created_at="")
    change = commands.set_policy(account, {"thresholds": {"review": 0.4}, "off": ["forwarded"]}, RULES)
    assert change.record["policy"] == {"thresholds": {"review": 0.4}, "weights": {}, "off": ["forwarded"]}
    assert change.shown["policy"]["thresholds"] == {"review": 0.4, "reject": 0.8}
    after = evolve(account, change.record)
    assert after is not None and after.policy == Policy(review=0.4, off=["forwarded"])
    assert record_policy(change.record["policy"]) == after.policy
    reset = evolve(after, commands.set_policy(after, {}, RULES).record)
    assert reset is not None and reset.policy is None


def test_a_bad_policy_is_refused_with_its_field() -> None:
    account = AccountRecord(id="acct_a000000000000001", name="", plan="watch", created_at="")
    with pytest.raises(Refused) as refused:
        commands.set_policy(account, {"weights": {"nope": 0.1}}, RULES)
    assert (str(refused.value), refused.value.context) == ("invalid_field", {"field": "policy.weights.nope"})
