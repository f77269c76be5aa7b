"""Retell's call webhooks as event bodies (domain.adapters.retell).

Payload shapes follow docs.retellai.com/features/webhook-overview (`{"event", "call"}`; `call_ended`
carries every call field but `call_analysis`) with the call as the Retell SDK's `PhoneCallResponse`
(github.com/RetellAI/retell-python-sdk, src/retell/types/phone_call_response.py: `transcript_object`
words in seconds of call audio, `call_cost.combined_cost` in cents, `telephony_identifier`).
"""

from __future__ import annotations

import pytest

from domain.adapters import PARSERS, Ignored
from domain.events import CallEnded, CallStarted, TurnEnded, TurnStarted
from domain.validation import InputError
from tests.unit.adapters.adapter_checks import assert_private, bodies, load, refused, validated

parse = PARSERS["retell"]
CALL_ID = "Jabr9TXYYJHfvl6Syypi88rdAHYHmcq6"
CALL_SID = "CA9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b"
NUMBER = "+14155550100"
CALLER = "+16465550123"
START = {
    "type": "call.started",
    "call_id": CALL_ID,
    "provider_call_id": CALL_SID,
    "from": CALLER,
    "to": NUMBER,
    "direction": "inbound",
    "at": "2025-06-02T09:30:00.000Z",
    "source": "retell",
}


def turn(kind: str, role: str, at: str, index: int, text: str | None = None) -> dict[str, object]:
    """A backfilled turn body, numbered `turn` by its utterance's place in `transcript_object`."""
    body: dict[str, object] = {"type": kind, "call_id": CALL_ID, "role": role, "at": at, "turn": index}
    return body if text is None else {**body, "text": text}


def test_call_started_starts_the_call() -> None:
    parsed = parse(load("retell_call_started"))
    assert parsed == [START]
    [started] = validated(parsed)
    assert isinstance(started, CallStarted)
    assert (started.number, started.caller, started.provider_call_id) == (NUMBER, CALLER, CALL_SID)


def test_call_ended_appends_the_start_the_turns_in_time_order_and_the_end() -> None:
    parsed = parse(load("retell_call_ended"))
    assert parsed == [
        START,
        turn("turn.started", "agent", "2025-06-02T09:30:00.520Z", 0),
        turn("turn.ended", "agent", "2025-06-02T09:30:03.200Z", 0, "Thanks for calling Acme Dental, how can I help?"),
        turn("turn.started", "user", "2025-06-02T09:30:04.300Z", 1),
        turn("turn.ended", "user", "2025-06-02T09:30:06.800Z", 1, "Hi, this is PELICAN7, I need to move my cleaning."),
        turn("turn.started", "agent", "2025-06-02T09:30:07.100Z", 2),
        # The caller spoke over the agent: their start (8.9 s) comes before the agent's end (9.25 s).
        turn("turn.started", "user", "2025-06-02T09:30:08.900Z", 3),
        turn("turn.ended", "agent", "2025-06-02T09:30:09.250Z", 2, "Sure, which day works for you?"),
        turn("turn.ended", "user", "2025-06-02T09:30:09.600Z", 3, "Friday."),
        {
            "type": "call.ended",
            "call_id": CALL_ID,
            "provider_call_id": CALL_SID,
            "at": "2025-06-02T09:30:42.500Z",
            "reason": "user_hangup",
            # combined_cost is 12.4 cents.
            "cost": 0.124,
        },
    ]
    events = validated(parsed)
    assert [type(e) for e in events] == [CallStarted] + [TurnStarted, TurnEnded] * 2 + [
        TurnStarted,
        TurnStarted,
        TurnEnded,
        TurnEnded,
        CallEnded,
    ]
    assert [e.at for e in events] == sorted(e.at for e in events)
    user_said = events[4]
    assert isinstance(user_said, TurnEnded) and user_said.words == 10
    ended = events[-1]
    assert isinstance(ended, CallEnded) and ended.cost == 0.124


def test_an_outbound_call_keeps_retells_numbers_as_dialled() -> None:
    payload = load("retell_call_started")
    payload["call"].update(direction="outbound", from_number=NUMBER, to_number=CALLER)
    parsed = parse(payload)
    assert parsed == [{**START, "from": NUMBER, "to": CALLER, "direction": "outbound"}]
    [started] = validated(parsed)
    assert isinstance(started, CallStarted)
    assert (started.number, started.caller) == (NUMBER, CALLER)


def test_a_call_that_never_connected_ends_with_what_retell_gave() -> None:
    payload = load("retell_call_ended")
    call = payload["call"]
    for key in ("start_timestamp", "transcript_object", "call_cost", "telephony_identifier"):
        del call[key]
    call["disconnection_reason"] = "dial_no_answer"
    start = {k: v for k, v in START.items() if k not in ("at", "provider_call_id")}
    assert parse(payload) == [
        start,
        {"type": "call.ended", "call_id": CALL_ID, "at": "2025-06-02T09:30:42.500Z", "reason": "dial_no_answer"},
    ]


def test_utterances_without_times_or_of_a_third_party_are_left_out() -> None:
    payload = load("retell_call_ended")
    utterances = payload["call"]["transcript_object"]
    utterances[0]["words"] = [{"word": "Thanks"}]
    utterances[1]["role"] = "transfer_target"
    turns = [b for b in bodies(parse(payload)) if b["type"].startswith("turn.")]
    # The utterances left out keep their numbers: the rest are still numbered by their place in the list.
    assert [(b["role"], b["at"], b["turn"]) for b in turns] == [
        ("agent", "2025-06-02T09:30:07.100Z", 2),
        ("user", "2025-06-02T09:30:08.900Z", 3),
        ("agent", "2025-06-02T09:30:09.250Z", 2),
        ("user", "2025-06-02T09:30:09.600Z", 3),
    ]


@pytest.mark.parametrize("name", ["retell_call_analyzed"])
def test_events_that_map_to_no_event_are_ignored(name: str) -> None:
    assert parse(load(name)) == Ignored("not_a_call_event")


def test_a_web_call_is_ignored() -> None:
    payload = load("retell_call_started")
    payload["call"]["call_type"] = "web_call"
    assert parse(payload) == Ignored("not_a_call_event")


@pytest.mark.parametrize(
    ("name", "missing", "field"),
    [
        ("retell_call_started", "call_id", "call.call_id"),
        ("retell_call_started", "from_number", "call.from_number"),
        ("retell_call_ended", "to_number", "call.to_number"),
    ],
)
def test_a_payload_not_retells_shape_names_the_missing_field(name: str, missing: str, field: str) -> None:
    payload = load(name)
    del payload["call"][missing]
    with pytest.raises(InputError) as excinfo:
        parse(payload)
    refused(excinfo, field)


@pytest.mark.parametrize(("missing", "field"), [("event", "event"), ("call", "call")])
def test_an_envelope_without_its_parts_names_them(missing: str, field: str) -> None:
    payload = load("retell_call_started")
    del payload[missing]
    with pytest.raises(InputError) as excinfo:
        parse(payload)
    refused(excinfo, field)


def test_no_canary_word_reaches_a_body_but_a_turns_text() -> None:
    for name in ("retell_call_started", "retell_call_ended"):
        parsed = parse(load(name))
        assert_private(parsed)
        validated(parsed)
