"""Labels (decisions section 17): the owner's label, or the platform's `disposition`, stands for a call in its
caller's history: good calls count for `prior.good` and `prior_good`, spam ones trip `prior_bad` on the
labelling account at once and network-wide only where two other accounts agree; the reputation counts each
account once per caller and label."""

from __future__ import annotations

from typing import Any

from callscreen.testing import Account, Harness
from domain import labels, queries
from domain.labels import Mark
from domain.rules import MIN_MS, SECOND_MS, ScoringRules
from domain.times import format_ms

NOW = 1_800_000_000_000
TO = "+14155552671"
CALLER = "+19197770801"
RULES = ScoringRules()


def start(call_id: str, at: int, caller: str = CALLER, **fields: Any) -> dict[str, Any]:
    return {"type": "call.started", "call_id": call_id, "to": TO, "from": caller, "at": format_ms(at), **fields}


def end(call_id: str, at: int, **fields: Any) -> dict[str, Any]:
    return {"type": "call.ended", "call_id": call_id, "at": format_ms(at), **fields}


def call(harness: Harness, account: Account, call_id: str, at: int, caller: str = CALLER, **ended: Any) -> int:
    """A call of a minute that settles at 35 (an attestation C): neither good nor bad by its score."""
    assert harness.post(account, start(call_id, at, caller, attrs={"attestation": "C"}), at)[0] == 200
    status, body = harness.post(account, end(call_id, at + MIN_MS, **ended), at + MIN_MS)
    assert status == 200
    return int(body["spam_score"])


def label(harness: Harness, account: Account, call_id: str, value: str, at: int) -> dict[str, Any]:
    status, body = harness.label(account, call_id, {"label": value}, at)
    assert status == 200, body
    return dict(body)


def probe(harness: Harness, account: Account, call_id: str, at: int, caller: str = CALLER) -> dict[str, Any]:
    status, answer = harness.post(account, start(call_id, at, caller, attrs={"attestation": "C"}), at)
    assert status == 200
    return dict(answer)


def reputation(harness: Harness, number: str = CALLER) -> dict[str, Any]:
    question = queries.ReputationQuestion(account_id="acct_any", number=number, now=NOW + 60 * MIN_MS)
    status, body = queries.answer(question, 0, harness.reads(), harness.rules)
    assert status == 200
    return dict(body)


# The pure rules.

NONE = {"good": 0, "bad": 0, "above": 0, "labelled_spam": 0, "labelled_good": 0}


def test_a_label_stands_for_the_calls_score_in_its_callers_history() -> None:
    assert labels.counts(None, 35, RULES) == NONE
    assert labels.counts(None, 10, RULES) == {**NONE, "good": 1}
    assert labels.counts(None, 90, RULES) == {**NONE, "bad": 1, "above": 1}
    assert labels.counts(None, None, RULES) == NONE
    assert labels.counts("good", 90, RULES) == {**NONE, "good": 1, "labelled_good": 1}
    assert labels.counts("spam", 0, RULES) == {**NONE, "bad": 1, "above": 1, "labelled_spam": 1}
    # Relabelled from spam to good, a call that settled at 90: one good call more, one bad and one spam less.
    before, after = Mark(label="spam", spam=90), Mark(label="good", spam=90)
    assert labels.change(before, after, RULES) == {
        "good": 1,
        "bad": -1,
        "above": -1,
        "labelled_spam": -1,
        "labelled_good": 1,
    }


def test_the_keys_part_counts_only_what_keys_gave() -> None:
    # A call an ingest token settled at 90, then labelled good by its owner (a key).
    before = Mark(spam=90, spam_key=False)
    after = Mark(label="good", spam=90, spam_key=False)
    assert labels.change(before, after, RULES) == {**NONE, "good": 1, "bad": -1, "above": -1, "labelled_good": 1}
    assert labels.change(before, after, RULES, keyed=True) == {**NONE, "good": 1, "labelled_good": 1}


def test_the_owner_wins_over_the_platform() -> None:
    assert labels.disposition_taken(None, None, "spam")
    assert labels.disposition_taken(labels.PLATFORM, "spam", "good")
    assert not labels.disposition_taken(labels.PLATFORM, "spam", "spam")
    assert not labels.disposition_taken(labels.OWNER, "good", "spam")
    assert not labels.disposition_taken(None, None, None)


# Through the folds.


def test_the_label_answer_is_the_call_record_and_the_latest_label_stands() -> None:
    harness, owner = Harness(), Account("acct_owner")
    call(harness, owner, "c1", NOW)
    record = label(harness, owner, "c1", "spam", NOW + 2 * MIN_MS)
    assert (record["call_id"], record["label"], record["labelled_at"]) == ("c1", "spam", format_ms(NOW + 2 * MIN_MS))
    record = label(harness, owner, "c1", "good", NOW + 3 * MIN_MS)
    assert (record["label"], record["labelled_at"]) == ("good", format_ms(NOW + 3 * MIN_MS))
    # The same label again changes nothing, not even its time.
    assert label(harness, owner, "c1", "good", NOW + 4 * MIN_MS)["labelled_at"] == format_ms(NOW + 3 * MIN_MS)
    assert reputation(harness)["labels"] == {"spam": 0, "good": 1}


def test_an_unknown_call_is_not_found_and_a_bad_label_is_an_invalid_field() -> None:
    harness, owner = Harness(), Account("acct_owner")
    assert harness.label(owner, "nope", {"label": "spam"}, NOW) == (404, {"error": "not_found"})
    call(harness, owner, "c1", NOW)
    for body in ({"label": "maybe"}, {}, {"label": None}, {"label": "spam", "extra": 1}):
        status, answer = harness.label(owner, "c1", body, NOW + 2 * MIN_MS)
        assert (status, answer["error"]) == (400, "invalid_field")
    # Another account's call is not found either.
    assert harness.label(Account("acct_other"), "c1", {"label": "spam"}, NOW)[0] == 404


def test_calls_labelled_good_count_in_prior_good_and_for_prior_good() -> None:
    harness, owner = Harness(), Account("acct_owner")
    for i in range(3):
        assert call(harness, owner, f"c{i}", NOW + i * 2 * MIN_MS) == 35
    before = probe(harness, owner, "p0", NOW + 10 * MIN_MS)
    assert (before["prior"]["good"], before["reasons"], before["score"]) == (0, ["attestation_c"], 0.35)
    for i in range(3):
        label(harness, owner, f"c{i}", "good", NOW + 11 * MIN_MS)
    after = probe(harness, owner, "p1", NOW + 12 * MIN_MS)
    assert (after["prior"]["good"], after["reasons"], after["score"]) == (3, ["attestation_c", "prior_good"], 0.175)


def test_a_call_labelled_spam_trips_prior_bad_on_the_labelling_account_at_once() -> None:
    harness, owner = Harness(), Account("acct_owner")
    call(harness, owner, "c1", NOW)
    assert "prior_bad" not in probe(harness, owner, "p0", NOW + 2 * MIN_MS)["reasons"]
    label(harness, owner, "c1", "spam", NOW + 3 * MIN_MS)
    assert probe(harness, owner, "p1", NOW + 4 * MIN_MS)["reasons"] == ["prior_bad", "attestation_c"]
    # Relabelled good, it no longer does.
    label(harness, owner, "c1", "good", NOW + 5 * MIN_MS)
    assert probe(harness, owner, "p2", NOW + 6 * MIN_MS)["reasons"] == ["attestation_c"]


def test_one_tenants_spam_labels_count_once_and_move_no_other_tenant() -> None:
    harness = Harness()
    poisoner, second, scorer = Account("acct_poison"), Account("acct_second"), Account("acct_scorer")
    for i in range(5):
        call(harness, poisoner, f"x{i}", NOW + i * 2 * MIN_MS)
        label(harness, poisoner, f"x{i}", "spam", NOW + i * 2 * MIN_MS + MIN_MS)
    assert reputation(harness)["labels"] == {"spam": 1, "good": 0}
    answer = probe(harness, scorer, "s1", NOW + 20 * MIN_MS)
    assert (answer["reasons"], answer["checks"]["network_bad_accounts"]) == (["attestation_c"], 1)
    # A second account's spam label: two other accounts agree, and the scorer's start says so.
    call(harness, second, "y1", NOW + 21 * MIN_MS)
    label(harness, second, "y1", "spam", NOW + 23 * MIN_MS)
    assert reputation(harness)["labels"] == {"spam": 2, "good": 0}
    answer = probe(harness, scorer, "s2", NOW + 24 * MIN_MS)
    assert (answer["reasons"], answer["checks"]["network_bad_accounts"]) == (["prior_bad", "attestation_c"], 2)


def test_a_disposition_is_the_label_until_the_owner_gives_one() -> None:
    harness, owner = Harness(), Account("acct_owner")
    call(harness, owner, "c1", NOW, disposition="spam")
    assert get(harness, owner, "c1")["label"] == "spam"
    assert probe(harness, owner, "p0", NOW + 2 * MIN_MS)["reasons"] == ["prior_bad", "attestation_c"]
    label(harness, owner, "c1", "good", NOW + 3 * MIN_MS)
    # Another reporter's end with the platform's verdict: the owner's label stands.
    status, body = harness.post(
        owner, end("c1", NOW + MIN_MS, disposition="spam", reason="completed"), NOW + 4 * MIN_MS
    )
    assert (status, body["duplicate"]) == (200, True)
    record = get(harness, owner, "c1")
    assert (record["label"], record["labelled_at"]) == ("good", format_ms(NOW + 3 * MIN_MS))
    assert reputation(harness)["labels"] == {"spam": 0, "good": 1}
    assert "prior_bad" not in probe(harness, owner, "p1", NOW + 5 * MIN_MS)["reasons"]


def test_the_owners_label_on_an_open_call_wins_over_its_ends_disposition() -> None:
    harness, owner = Harness(), Account("acct_owner")
    assert harness.post(owner, start("c1", NOW, attrs={"attestation": "C"}), NOW)[0] == 200
    label(harness, owner, "c1", "good", NOW + SECOND_MS)
    harness.post(owner, end("c1", NOW + MIN_MS, disposition="spam"), NOW + MIN_MS)
    assert get(harness, owner, "c1")["label"] == "good"
    # Counted once: labelled while open, then settled.
    assert probe(harness, owner, "p0", NOW + 2 * MIN_MS)["prior"]["good"] == 1
    assert reputation(harness)["labels"] == {"spam": 0, "good": 1}


def test_a_later_ends_disposition_labels_a_call_that_settled_without_one() -> None:
    harness, owner = Harness(), Account("acct_owner")
    call(harness, owner, "c1", NOW)
    harness.post(owner, end("c1", NOW + MIN_MS, disposition="good", reason="completed"), NOW + 2 * MIN_MS)
    assert get(harness, owner, "c1")["label"] == "good"
    assert probe(harness, owner, "p0", NOW + 3 * MIN_MS)["prior"]["good"] == 1


def test_a_label_folded_again_counts_once() -> None:
    harness, owner = Harness(), Account("acct_owner")
    call(harness, owner, "c1", NOW)
    label(harness, owner, "c1", "spam", NOW + 2 * MIN_MS)
    facts = [f for f in harness.folded_facts if f.__struct_config__.tag == "call.labelled"]
    assert len(facts) == 1
    assert not harness.view.apply(facts[0])
    assert harness.view.caller_for(owner.id, CALLER).evidence.labelled_spam == 1
    assert reputation(harness)["labels"] == {"spam": 1, "good": 0}


def get(harness: Harness, account: Account, call_id: str) -> dict[str, Any]:
    status, body = queries.answer(
        queries.CallGet(account_id=account.id, call_id=call_id), 0, harness.reads(), harness.rules
    )
    assert status == 200
    return dict(body)


def test_dispositions_a_path_token_posted_weigh_less_network_wide() -> None:
    harness = Harness()
    scorer = Account("acct_scorer")
    tokens = [Account(f"acct_token{i}", credential="ingest") for i in range(2)]
    for i, account in enumerate(tokens):
        call(harness, account, f"t{i}", NOW + i * 2 * MIN_MS, disposition="spam")
        assert get(harness, account, f"t{i}")["label"] == "spam"
    answer = probe(harness, scorer, "p0", NOW + 10 * MIN_MS)
    checks = answer["checks"]
    # Two accounts agree, but only on what their ingest tokens posted: 0.5 of an account each.
    assert (checks["network_bad_accounts"], checks["network_bad_token_accounts"]) == (2, 2)
    assert answer["reasons"] == ["attestation_c"]
    # An owner's label (a key's) on one of them makes that account's agreement whole.
    label(harness, tokens[0], "t0", "spam", NOW + 11 * MIN_MS)
    assert probe(harness, scorer, "p1", NOW + 12 * MIN_MS)["checks"]["network_bad_token_accounts"] == 1


def test_a_quiet_calls_label_counts_in_its_accounts_own_history_only() -> None:
    harness, owner, other = Harness(), Account("acct_owner"), Account("acct_other")
    body = start("q1", NOW - 3 * MIN_MS, quiet=True, attrs={"attestation": "C"})
    assert harness.post(owner, body, NOW)[0] == 200
    assert harness.post(owner, end("q1", NOW - 2 * MIN_MS), NOW)[0] == 200
    label(harness, owner, "q1", "spam", NOW)
    assert probe(harness, owner, "p0", NOW + MIN_MS)["reasons"] == ["prior_bad", "attestation_c"]
    assert reputation(harness)["labels"] == {"spam": 0, "good": 0}
    assert harness.view.caller_for(other.id, CALLER).evidence.labelled_spam == 0
