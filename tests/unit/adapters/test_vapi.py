"""Vapi's server messages as event bodies (domain.adapters.vapi).

Payload shapes follow the Vapi server SDK's generated types (github.com/VapiAI/server-sdk-python,
src/vapi/types/: `ServerMessage` wrapping `ServerMessageStatusUpdate`, `ServerMessageSpeechUpdate`,
`ServerMessageUserInterrupted`, `ServerMessageTranscript`, `ServerMessageEndOfCallReport`, with `Call`,
`CostBreakdown`, `Artifact`, `Analysis`, `CreateCustomerDto`), i.e. docs.vapi.ai/server-url/events.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from domain.adapters import PARSERS, Ignored
from domain.events import CallEnded, CallStarted, Interruption, Transcript, TurnStarted
from domain.validation import InputError
from tests.unit.adapters.adapter_checks import assert_private, bodies, load, refused, validated

parse = PARSERS["vapi"]
CALL_ID = "7c1f6a52-3a1e-4b7d-9a52-0d3c9e1b2f41"
CALL_SID = "CA5d3f0b8e2c1a4f6e9b7d0c2a4e6f8b1d"
NUMBER = "+14155550100"
CALLER = "+16465550123"


def test_an_inbound_call_in_progress_starts_the_call() -> None:
    parsed = parse(load("vapi_status_update"))
    assert parsed == [
        {
            "type": "call.started",
            "call_id": CALL_ID,
            "provider_call_id": CALL_SID,
            "from": CALLER,
            "to": NUMBER,
            "direction": "inbound",
            "at": "2025-06-02T09:30:00.250Z",
            "source": "vapi",
        }
    ]
    [started] = validated(parsed)
    assert isinstance(started, CallStarted)
    assert (started.number, started.caller, started.at) == (NUMBER, CALLER, 1_748_856_600_250)


def test_an_outbound_call_dials_from_the_accounts_number() -> None:
    payload = load("vapi_status_update")
    payload["message"]["call"]["type"] = "outboundPhoneCall"
    parsed = parse(payload)
    assert parsed == [
        {
            "type": "call.started",
            "call_id": CALL_ID,
            "provider_call_id": CALL_SID,
            "from": NUMBER,
            "to": CALLER,
            "direction": "outbound",
            "at": "2025-06-02T09:30:00.250Z",
            "source": "vapi",
        }
    ]
    [started] = validated(parsed)
    assert isinstance(started, CallStarted)
    assert (started.number, started.caller) == (NUMBER, CALLER)


def test_the_numbers_may_come_on_the_call_alone() -> None:
    payload = load("vapi_status_update")
    del payload["message"]["customer"]
    payload["message"]["call"]["phoneNumber"] = payload["message"].pop("phoneNumber")
    [started] = bodies(parse(payload))
    assert (started["from"], started["to"]) == (CALLER, NUMBER)


def test_speech_updates_are_turn_starts_and_ends() -> None:
    parsed = parse(load("vapi_speech_update"))
    assert parsed == [
        {"type": "turn.started", "call_id": CALL_ID, "role": "user", "turn": 1, "at": "2025-06-02T09:30:04.310Z"}
    ]
    [event] = validated(parsed)
    assert isinstance(event, TurnStarted) and event.turn == 1

    stopped = load("vapi_speech_update")
    stopped["message"].update(status="stopped", role="assistant", turn=2, timestamp=1748856612000)
    parsed = parse(stopped)
    assert parsed == [
        {"type": "turn.ended", "call_id": CALL_ID, "role": "agent", "turn": 2, "at": "2025-06-02T09:30:12.000Z"}
    ]
    validated(parsed)


def test_the_user_interrupting_is_an_interruption() -> None:
    parsed = parse(load("vapi_user_interrupted"))
    assert parsed == [{"type": "interruption", "call_id": CALL_ID, "at": "2025-06-02T09:30:09.020Z"}]
    [event] = validated(parsed)
    assert isinstance(event, Interruption) and event.role == "user"


@pytest.mark.parametrize("kind", ['transcript[transcriptType="final"]', "transcript"])
def test_a_final_transcript_carries_its_text_to_be_measured(kind: str) -> None:
    payload = load("vapi_transcript_final")
    payload["message"]["type"] = kind
    parsed = parse(payload)
    assert parsed == [
        {
            "type": "transcript",
            "call_id": CALL_ID,
            "role": "user",
            "at": "2025-06-02T09:30:07.480Z",
            "text": "Hi, this is PELICAN7, I need to move my cleaning to Friday.",
        }
    ]
    assert_private(parsed)
    [event] = validated(parsed)
    assert isinstance(event, Transcript)
    assert (event.words, event.chars) == (12, 59)


def test_the_end_of_call_report_ends_the_call_with_its_costs() -> None:
    parsed = parse(load("vapi_end_of_call_report"))
    assert parsed == [
        {
            "type": "call.ended",
            "call_id": CALL_ID,
            "provider_call_id": CALL_SID,
            "at": "2025-06-02T09:30:42.512Z",
            "reason": "customer-ended-call",
            "cost": 0.1256,
            # transport → carrier, vapi → platform; total, token counts and analysis costs are no part.
            "cost_breakdown": {"carrier": 0.0104, "stt": 0.0126, "llm": 0.0211, "tts": 0.0315, "platform": 0.05},
        }
    ]
    assert_private(parsed)
    [ended] = validated(parsed)
    assert isinstance(ended, CallEnded)
    assert ended.cost_breakdown == {"carrier": 0.0104, "stt": 0.0126, "llm": 0.0211, "tts": 0.0315, "platform": 0.05}


def test_the_reports_own_cost_breakdown_comes_first() -> None:
    payload = load("vapi_end_of_call_report")
    payload["message"]["costBreakdown"] = {"transport": 0.02, "vapi": 0.04, "total": 0.06}
    [ended] = bodies(parse(payload))
    assert ended["cost_breakdown"] == {"carrier": 0.02, "platform": 0.04}


@pytest.mark.parametrize(
    "name",
    ["vapi_transcript_partial", "vapi_conversation_update", "vapi_status_update_web_call"],
)
def test_messages_that_map_to_no_event_are_ignored(name: str) -> None:
    assert parse(load(name)) == Ignored("not_a_call_event")


@pytest.mark.parametrize("status", ["queued", "ringing", "forwarding", "ended"])
def test_other_statuses_are_ignored(status: str) -> None:
    payload = load("vapi_status_update")
    payload["message"]["status"] = status
    assert parse(payload) == Ignored("not_a_call_event")


def _without(payload: dict[str, Any], *path: str) -> dict[str, Any]:
    changed = copy.deepcopy(payload)
    holder = changed
    for key in path[:-1]:
        holder = holder[key]
    del holder[path[-1]]
    return changed


@pytest.mark.parametrize(
    ("name", "path", "field"),
    [
        ("vapi_status_update", ("message",), "message"),
        ("vapi_status_update", ("message", "type"), "message.type"),
        ("vapi_status_update", ("message", "call", "id"), "message.call.id"),
        ("vapi_status_update", ("message", "call", "type"), "message.call.type"),
        ("vapi_speech_update", ("message", "call"), "message.call"),
        ("vapi_end_of_call_report", ("message", "call", "id"), "message.call.id"),
        ("vapi_transcript_final", ("message", "transcript"), "message.transcript"),
    ],
)
def test_a_payload_not_vapis_shape_names_the_missing_field(name: str, path: tuple[str, ...], field: str) -> None:
    with pytest.raises(InputError) as excinfo:
        parse(_without(load(name), *path))
    refused(excinfo, field)


def test_a_start_without_the_customers_number_names_it() -> None:
    payload = _without(_without(load("vapi_status_update"), "message", "customer"), "message", "call", "customer")
    with pytest.raises(InputError) as excinfo:
        parse(payload)
    refused(excinfo, "message.customer.number")


def test_no_canary_word_reaches_a_body_but_a_turns_text() -> None:
    for name in (
        "vapi_status_update",
        "vapi_speech_update",
        "vapi_user_interrupted",
        "vapi_transcript_final",
        "vapi_end_of_call_report",
    ):
        parsed = parse(load(name))
        assert_private(parsed)
        validated(parsed)
