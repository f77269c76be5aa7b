"""Evaluation's arithmetic (`domain.evaluation`) and its bounded reads of a partition's labelled calls
(`domain.queries.evaluation_part`), read on from each stop as `GET /v1/evaluation` reads them."""

from __future__ import annotations

from typing import Any

from callscreen.testing import Account, Harness, as_sent
from domain import evaluation, queries
from domain.queries import EvaluationPart
from domain.rules import HOUR_MS, MIN_MS
from domain.times import format_ms

TO = "+14155552671"
BASE = 1_780_000_000_000 - 1_780_000_000_000 % HOUR_MS


def tally_of(*calls: tuple[str, tuple[str, ...], str]) -> evaluation.Tally:
    tally = evaluation.empty()
    for action, reasons, label in calls:
        evaluation.count(tally, action, reasons, label)
    return tally


def test_rates_count_a_reject_as_the_positive() -> None:
    tally = tally_of(
        ("reject", ("self_call", "attestation_failed"), "spam"),
        ("reject", ("self_call",), "spam"),
        ("reject", ("attestation_failed",), "good"),
        ("review", ("attestation_failed",), "spam"),
        ("allow", ("attestation_c",), "spam"),
        ("allow", (), "good"),
        ("allow", ("attestation_c",), "good"),
    )
    assert evaluation.report(tally) == {
        "labelled": 7,
        "matrix": {
            "allow": {"spam": 1, "good": 2},
            "review": {"spam": 1, "good": 0},
            "reject": {"spam": 2, "good": 1},
        },
        "precision": 0.6667,
        "recall": 0.5,
        "false_positive_rate": 0.3333,
        "by_reason": {
            "attestation_c": {"spam": 1, "good": 1},
            "attestation_failed": {"spam": 2, "good": 1},
            "self_call": {"spam": 2, "good": 0},
        },
    }


def test_a_ratio_over_nothing_is_null() -> None:
    assert evaluation.report(evaluation.empty()) == {
        "labelled": 0,
        "matrix": {action: {"spam": 0, "good": 0} for action in ("allow", "review", "reject")},
        "precision": None,
        "recall": None,
        "false_positive_rate": None,
        "by_reason": {},
    }
    # Only good calls, none rejected: no precision and no recall, a false-positive rate of 0.
    only_good = evaluation.report(tally_of(("allow", (), "good")))
    assert (only_good["precision"], only_good["recall"], only_good["false_positive_rate"]) == (None, None, 0.0)


def test_partitions_add_up_to_the_whole() -> None:
    first = tally_of(("reject", ("self_call",), "spam"), ("allow", (), "good"))
    second = tally_of(("reject", ("self_call",), "good"), ("review", ("attestation_b",), "spam"))
    total = evaluation.empty()
    evaluation.add(total, first)
    evaluation.add(total, second)
    whole = tally_of(
        ("reject", ("self_call",), "spam"),
        ("allow", (), "good"),
        ("reject", ("self_call",), "good"),
        ("review", ("attestation_b",), "spam"),
    )
    assert total == whole


def labelled_harness() -> Harness:
    """Twelve calls an hour apart from their own callers, every one but the last two labelled: odd hours
    spam, even ones good; calls 0-3 come with a failed attestation (a `review`)."""
    h, account = Harness(), Account("acct_eval")
    for i in range(12):
        at = BASE + i * HOUR_MS
        attestation = "failed" if i < 4 else "A"
        body = {
            "type": "call.started",
            "call_id": f"c{i}",
            "to": TO,
            "from": f"+1212555{i:04d}",
            "at": format_ms(at),
            "attrs": {"attestation": attestation},
        }
        assert h.post(account, body, at)[0] == 200
        if i < 10:
            status, _ = h.label(account, f"c{i}", {"label": "spam" if i % 2 else "good"}, at + MIN_MS)
            assert status == 200
    return h


def read_all(h: Harness, since: int | None, until: int | None, max_rows: int | None) -> tuple[dict[str, Any], int]:
    """The edge's reads: every partition from the top, on from each stop until none; and how many reads."""
    reads = h.reads(max_rows)
    total, asked = evaluation.empty(), 0
    for partition in range(h.partitions):
        before = None
        while True:
            question = EvaluationPart(account_id="acct_eval", since=since, until=until, before=before)
            body = as_sent(queries.evaluation_part(question, partition, reads))
            asked += 1
            evaluation.add(total, body["tally"])
            if body["stop"] is None:
                break
            before = tuple(body["stop"])
    return evaluation.report(total), asked


def test_bounded_reads_count_each_labelled_call_once() -> None:
    h = labelled_harness()
    whole, asked_whole = read_all(h, None, None, None)
    assert asked_whole == h.partitions
    assert whole["labelled"] == 10
    assert whole["matrix"] == {
        "allow": {"spam": 3, "good": 3},
        "review": {"spam": 2, "good": 2},
        "reject": {"spam": 0, "good": 0},
    }
    assert whole["by_reason"] == {"attestation_failed": {"spam": 2, "good": 2}}
    bounded, asked_bounded = read_all(h, None, None, 1)
    assert bounded == whole
    # One row a read: every partition's hours read one by one, and one more read finds nothing left.
    assert asked_bounded > asked_whole


def test_the_window_holds_calls_started_in_it() -> None:
    h = labelled_harness()
    # Calls 2 to 5: since is inclusive, until exclusive.
    window, _ = read_all(h, BASE + 2 * HOUR_MS, BASE + 6 * HOUR_MS, 1)
    assert window["labelled"] == 4
    assert window["matrix"]["review"] == {"spam": 1, "good": 1}
    assert window["matrix"]["allow"] == {"spam": 1, "good": 1}
