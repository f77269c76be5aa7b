"""Twilio's voice webhook and status callback forms as event bodies (domain.adapters.twilio).

Form parameters follow Twilio's "TwiML voice: your response" request parameters and the call status
callback parameters (twilio.com/docs/voice/twiml#request-parameters,
twilio.com/docs/voice/api/call-resource#statuscallback: `CallStatus`, `Direction`, `CallDuration`,
`Timestamp` in RFC 2822, `StirVerstat`, `FromCity`/`FromState`/`FromZip`/`FromCountry`, `CallerName`).
"""

from __future__ import annotations

import pytest

from domain import gate
from domain.adapters import PARSERS, Ignored
from domain.events import CallEnded, CallStarted
from domain.validation import InputError
from tests.unit.adapters.adapter_checks import assert_private, bodies, load, refused, validated

parse = PARSERS["twilio"]
INBOUND_SID = "CA5d3f0b8e2c1a4f6e9b7d0c2a4e6f8b1d"
OUTBOUND_SID = "CA1b2c3d4e5f60718293a4b5c6d7e8f90a"
NUMBER = "+14155550100"
CALLER = "+16465550123"


def test_an_incoming_call_starts_with_the_gates_attrs() -> None:
    form = load("twilio_voice_inbound")
    parsed = parse(form)
    assert parsed == [
        {
            "type": "call.started",
            "call_id": INBOUND_SID,
            "provider_call_id": INBOUND_SID,
            "from": CALLER,
            "to": NUMBER,
            "direction": "inbound",
            "source": "twilio",
            "attrs": {
                "attestation": "B",
                "carrier": "twilio",
                "geo": {"city": "NEW YORK", "region": "NY", "zip": "10001", "country": "US"},
                "caller_name": "ACME LTD",
            },
        }
    ]
    # The same translations as the carrier gate's, and the same id, so a gated call folds with this one.
    assert parsed[0]["attrs"] == gate.attrs_of(form)
    assert parsed[0]["call_id"] == gate.started_body(form, NUMBER)["call_id"]
    [started] = validated(parsed)
    assert isinstance(started, CallStarted)
    assert (started.number, started.caller, started.attrs["attestation"]) == (NUMBER, CALLER, "B")


def test_an_outbound_call_in_progress_starts_at_its_timestamp() -> None:
    parsed = parse(load("twilio_status_in_progress_outbound"))
    assert parsed == [
        {
            "type": "call.started",
            "call_id": OUTBOUND_SID,
            "provider_call_id": OUTBOUND_SID,
            "from": NUMBER,
            "to": CALLER,
            "direction": "outbound",
            "at": "2025-06-02T09:30:00.000Z",
            "source": "twilio",
            # The From* parameters describe the account's own number here: not the other party's.
            "attrs": {"carrier": "twilio"},
        }
    ]
    [started] = validated(parsed)
    assert isinstance(started, CallStarted)
    assert (started.number, started.caller) == (NUMBER, CALLER)


def test_a_final_status_ends_the_call() -> None:
    parsed = parse(load("twilio_status_completed"))
    assert parsed == [
        {
            "type": "call.ended",
            "call_id": INBOUND_SID,
            "reason": "completed",
            "provider_call_id": INBOUND_SID,
            "at": "2025-06-02T09:30:42.000Z",
        }
    ]
    [ended] = validated(parsed)
    assert isinstance(ended, CallEnded) and ended.reason == "completed"


@pytest.mark.parametrize("status", ["busy", "no-answer", "failed", "canceled"])
def test_every_final_status_is_the_reason(status: str) -> None:
    form = {**load("twilio_status_completed"), "CallStatus": status}
    [ended] = bodies(parse(form))
    assert (ended["type"], ended["reason"]) == ("call.ended", status)


def test_a_form_without_a_direction_keeps_the_default() -> None:
    form = load("twilio_voice_inbound")
    del form["Direction"]
    [started] = bodies(parse(form))
    assert "direction" not in started and started["attrs"]["attestation"] == "B"


@pytest.mark.parametrize("status", ["queued", "initiated"])
def test_statuses_before_the_call_rings_are_ignored(status: str) -> None:
    form = {**load("twilio_status_initiated"), "CallStatus": status}
    assert parse(form) == Ignored("not_a_call_event")


@pytest.mark.parametrize("missing", ["CallSid", "CallStatus", "From", "To"])
def test_a_form_not_twilios_shape_names_the_missing_field(missing: str) -> None:
    form = load("twilio_voice_inbound")
    del form[missing]
    with pytest.raises(InputError) as excinfo:
        parse(form)
    refused(excinfo, missing)


def test_an_unreadable_timestamp_is_named() -> None:
    form = {**load("twilio_status_completed"), "Timestamp": "yesterday"}
    with pytest.raises(InputError) as excinfo:
        parse(form)
    refused(excinfo, "Timestamp")


def test_no_canary_word_reaches_a_body() -> None:
    for name in ("twilio_voice_inbound", "twilio_status_in_progress_outbound", "twilio_status_completed"):
        parsed = parse(load(name))
        assert_private(parsed)
        validated(parsed)
