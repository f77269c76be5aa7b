"""The gate's pure parts: the carrier's form as event bodies, and the challenge's fold and its alert."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from domain import calls, detectors, features, gate
from domain.calls import CallState, Outcome, Stored
from domain.detectors import NumberWindow
from domain.events import AnyEvent, CallStarted, GateForwarded, GatePressed, Interruption
from domain.facts import BlockPlaced, CallSettled, ForwardDone
from domain.features import FeatureView
from domain.rules import Rules
from domain.store import MemoryStore
from domain.validation import Stamp, TimeBounds, parse_event

RULES = Rules()
AT = 1_800_000_000_000
NUMBER = "+14155550100"
CALLER = "+16465550123"


@pytest.mark.parametrize(
    ("stir", "attestation"),
    [
        ("TN-Validation-Passed-A", "A"),
        ("TN-Validation-Passed-B", "B"),
        ("TN-Validation-Passed-C", "C"),
        ("TN-Validation-Failed-A", "failed"),
        ("TN-Validation-Failed-C", "failed"),
        ("TN-Validation-Failed", "failed"),
        ("No-TN-Validation", "none"),
        ("TN-Validation-Passed-D", "none"),
        ("", "none"),
        (None, "none"),
    ],
)
def test_stir_verstat_becomes_an_attestation(stir: str | None, attestation: str) -> None:
    assert gate.attestation(stir) == attestation


def test_the_voice_form_becomes_a_start_for_the_tokens_own_number() -> None:
    form = {
        "CallSid": "CA01",
        "From": "+16465550123",
        "To": "+19995550000",
        "StirVerstat": "TN-Validation-Passed-B",
        "FromCity": "NEW YORK",
        "FromState": "NY",
        "FromZip": "10001",
        "FromCountry": "US",
        "CallerName": "ACME LTD",
        "ForwardedFrom": "+14155550199",
    }
    assert gate.started_body(form, NUMBER) == {
        "type": "call.started",
        "call_id": "CA01",
        "provider_call_id": "CA01",
        "to": NUMBER,
        "from": "+16465550123",
        "direction": "inbound",
        "source": "gate",
        "attrs": {
            "attestation": "B",
            "carrier": "twilio",
            "geo": {"city": "NEW YORK", "region": "NY", "zip": "10001", "country": "US"},
            "caller_name": "ACME LTD",
            "forwarded_from": "+14155550199",
        },
    }
    assert gate.attrs_of({"CallSid": "CA02"}) == {"attestation": "none", "carrier": "twilio"}


def test_only_a_final_status_ends_the_call() -> None:
    assert gate.ended_body({"CallSid": "CA01", "CallStatus": "ringing"}) is None
    assert gate.ended_body({"CallSid": "CA01", "CallStatus": "busy"}) == {
        "type": "call.ended",
        "call_id": "CA01",
        "reason": "busy",
    }
    assert gate.duration_of({"CallDuration": "42"}) == 42
    assert gate.duration_of({"CallDuration": "-1"}) is None
    assert gate.duration_of({}) is None


def gated_start(event_id: str, digit: str = "4", **fields: Any) -> CallStarted:
    body = {**gate.started_body({"CallSid": "CA01", "From": CALLER, **fields}, NUMBER)}
    started = parse_event(body, Stamp(event_id, "acct_x", "guard", AT), TimeBounds.of(RULES.limits))
    assert isinstance(started, CallStarted)
    return msgspec.structs.replace(started, gate_digit=digit)


def pressed(event_id: str, digits: str) -> GatePressed:
    return GatePressed(
        id=event_id, account_id="acct_x", call_id="CA01", at=AT + 5000, received_at=AT + 5000, digits=digits
    )


def fold(state: Stored | None, event: AnyEvent, view: FeatureView) -> Outcome:
    outcome = calls.fold(state, event, features.context(view, state, event, RULES), RULES)
    for fact in outcome.facts:
        view.apply(fact)
    return outcome


def challenged(view: FeatureView) -> CallState:
    first = fold(None, gated_start("ev-1", StirVerstat="TN-Validation-Failed-A"), view)
    assert isinstance(first.state, CallState)
    assert first.body["answer"].action == "review"
    assert (first.body["digit"], first.body["state"]) == ("4", "open")
    return first.state


def test_the_right_digit_passes_and_a_repeated_start_keeps_the_first_digit() -> None:
    view = FeatureView(MemoryStore(), RULES.scoring)
    state = challenged(view)
    retry = fold(state, gated_start("ev-2", digit="9", StirVerstat="TN-Validation-Failed-A"), view)
    assert retry.body["digit"] == "4"
    outcome = fold(state, pressed("ev-3", "4"), view)
    assert outcome.body["result"] == "pass"
    assert isinstance(outcome.state, CallState) and outcome.state.gate_passed
    assert outcome.facts == []


@pytest.mark.parametrize(("digits", "reason"), [("7", "gate_fail"), ("#", "gate_fail"), ("", "gate_timeout")])
def test_a_wrong_or_missing_digit_ends_the_call(digits: str, reason: str) -> None:
    view = FeatureView(MemoryStore(), RULES.scoring)
    state = challenged(view)
    outcome = fold(state, pressed("ev-3", digits), view)
    assert outcome.body == {"result": reason}
    assert isinstance(outcome.state, CallState)
    assert (outcome.state.state, outcome.state.reason, outcome.state.duration_s) == ("ended", reason, 0)
    (settled,) = [f for f in outcome.facts if isinstance(f, CallSettled)]
    assert settled.reason == reason
    # Folded again (a crash before its fact landed): the same answer and the same fact.
    again = fold(outcome.state, pressed("ev-3", digits), view)
    assert (again.body, again.facts) == (outcome.body, outcome.facts)
    # A later keypress for the ended call changes nothing.
    assert fold(outcome.state, pressed("ev-4", "4"), view).body == {"result": "ended"}


def test_a_failed_gate_raises_rate_exceeded_with_gate_failed_and_a_block() -> None:
    view = FeatureView(MemoryStore(), RULES.scoring)
    start = fold(None, gated_start("ev-1", StirVerstat="TN-Validation-Failed-A"), view)
    failed = fold(start.state, pressed("ev-3", "1"), view)
    window = NumberWindow()
    raised = []
    placed = []
    for fact in [*start.facts, *failed.facts]:
        observed = detectors.observe(window, fact, RULES.detectors, RULES.scoring)
        window = observed.window
        raised += observed.alerts
        placed += [f for f in observed.facts if isinstance(f, BlockPlaced)]
    (alert,) = raised
    assert alert.type == "caller.rate_exceeded"
    assert alert.data == {
        "number": NUMBER,
        "caller": CALLER,
        "call_id": "CA01",
        "count": 1,
        "window_min": RULES.detectors.rate_window_min,
        "gate": "failed",
    }
    assert [(b.caller, b.until - b.since) for b in placed] == [(CALLER, RULES.detectors.block_min * 60_000)]


def test_a_rejected_gated_call_ends_at_once() -> None:
    view = FeatureView(MemoryStore(), RULES.scoring)
    outcome = fold(None, gated_start("ev-1", StirVerstat="TN-Validation-Failed-A", From=NUMBER), view)
    assert outcome.body["answer"].action == "reject"
    assert outcome.body["state"] == "ended"
    assert isinstance(outcome.state, CallState) and outcome.state.reason == "rejected"
    assert [type(f).__name__ for f in outcome.facts] == ["CallDecided", "CallSettled"]


def forwarded(event_id: str, failed: bool) -> GateForwarded:
    return GateForwarded(
        id=event_id,
        account_id="acct_x",
        call_id="CA01",
        at=AT + 900,
        received_at=AT + 900,
        host="agent.example.com",
        duration_ms=4100,
        failed=failed,
    )


def test_a_forward_becomes_a_fact_for_the_numbers_detectors() -> None:
    view = FeatureView(MemoryStore(), RULES.scoring)
    start = fold(None, gated_start("ev-1"), view)
    outcome = fold(start.state, forwarded("ev-2", failed=True), view)
    assert (outcome.status, outcome.body, outcome.state) == (200, None, None)
    assert outcome.facts == [
        ForwardDone(
            id="ev-2",
            account_id="acct_x",
            number=NUMBER,
            at=AT + 900,
            call_id="CA01",
            host="agent.example.com",
            duration_ms=4100,
            failed=True,
        )
    ]
    # A forward for a call the log does not hold is refused, and places nothing.
    assert fold(None, forwarded("ev-3", failed=False), view).status == 404


def barge(event_id: str, second: int) -> Interruption:
    at = AT + second * 1000
    return Interruption(
        id=event_id, account_id="acct_x", call_id="CA01", at=at, received_at=at, plan="guard", role="user"
    )


ACCOUNT_SID = "AC" + "2" * 32


@pytest.mark.parametrize(
    ("hang_up", "account_sid", "ended"),
    [
        (True, ACCOUNT_SID, True),
        # A state from before hang-ups needed a signed form: no carrier account, so nothing is ended.
        (True, None, False),
        (False, None, False),
    ],
)
def test_the_first_alert_level_flag_on_a_gated_call_names_the_call_to_end(
    hang_up: bool, account_sid: str | None, ended: bool
) -> None:
    view = FeatureView(MemoryStore(), RULES.scoring)
    started = msgspec.structs.replace(gated_start("ev-1"), hang_up=hang_up, carrier_account_sid=account_sid)
    state = fold(None, started, view).state
    raised = []
    for n in range(7):
        outcome = fold(state, barge(f"ev-b{n}", n), view)
        state = outcome.state or state
        raised += outcome.alerts
    (alert,) = raised
    assert alert.type == "call.suspicious"
    assert alert.data.get("hung_up") is (True if ended else None)
    assert (alert.hang_up, alert.carrier_account_sid) == (("CA01", ACCOUNT_SID) if ended else (None, None))
    # The carrier's ids stay out of what receivers get.
    assert "hang_up" not in alert.envelope() and "carrier_account_sid" not in alert.envelope()
