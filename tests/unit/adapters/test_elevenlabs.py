"""ElevenLabs' post-call webhooks as event bodies (domain.adapters.elevenlabs).

Payload shapes follow elevenlabs.io/docs/agents-platform/workflows/post-call-webhooks (`{"type",
"event_timestamp", "data"}`) with `data` as the ElevenLabs SDK's conversation history models
(github.com/elevenlabs/elevenlabs-python, src/elevenlabs/types/: `ConversationHistoryTranscriptCommonModelOutput`,
`ConversationHistoryMetadataCommonModel`, `ConversationHistoryTwilioPhoneCallModel`,
`ConversationChargingCommonModel`).
"""

from __future__ import annotations

import pytest

from domain.adapters import PARSERS, Ignored
from domain.events import CallEnded, CallStarted, TurnEnded
from domain.validation import InputError
from tests.unit.adapters.adapter_checks import assert_private, bodies, load, refused, validated

parse = PARSERS["elevenlabs"]
CALL_ID = "conv_01jwx3m2a7c4d5e6f7g8h9j0k1"
CALL_SID = "CA5d3f0b8e2c1a4f6e9b7d0c2a4e6f8b1d"
NUMBER = "+14155550100"
CALLER = "+16465550123"


def said(role: str, at: str, text: str, interrupted: bool, index: int) -> dict[str, object]:
    """A backfilled message, numbered `turn` by its place in `data.transcript`."""
    return {
        "type": "turn.ended",
        "call_id": CALL_ID,
        "role": role,
        "at": at,
        "text": text,
        "interrupted": interrupted,
        "turn": index,
    }


START = {
    "type": "call.started",
    "call_id": CALL_ID,
    "provider_call_id": CALL_SID,
    "from": CALLER,
    "to": NUMBER,
    "direction": "inbound",
    "at": "2025-06-02T09:30:00.000Z",
    "source": "elevenlabs",
}
TURNS = [
    said("agent", "2025-06-02T09:30:00.000Z", "Thanks for calling Acme Dental, how can I help?", False, 0),
    said("user", "2025-06-02T09:30:04.000Z", "Hi, this is PELICAN7, I need to move my cleaning.", False, 1),
    # The tool call at 7 s (entry 2) is no speech, so 2 is no turn; the caller cut the agent off at 8 s.
    said("agent", "2025-06-02T09:30:08.000Z", "Sure, which day works for", True, 3),
    said("user", "2025-06-02T09:30:09.000Z", "Friday.", False, 4),
]
END = {
    "type": "call.ended",
    "call_id": CALL_ID,
    "provider_call_id": CALL_SID,
    "at": "2025-06-02T09:30:42.000Z",
    "reason": "Remote party ended the call",
    # charging's fiat prices (USD); metadata.cost (512) and the *_charge figures are credits.
    "cost": 0.0875,
    "cost_breakdown": {"llm": 0.0042, "platform": 0.0833},
}


def test_one_post_is_the_start_the_turns_by_time_and_the_end() -> None:
    parsed = parse(load("elevenlabs_post_call_transcription"))
    assert parsed == [START, *TURNS, END]
    events = validated(parsed)
    assert [type(e) for e in events] == [CallStarted, TurnEnded, TurnEnded, TurnEnded, TurnEnded, CallEnded]
    started, cut_off, ended = events[0], events[3], events[-1]
    assert isinstance(started, CallStarted) and (started.number, started.caller) == (NUMBER, CALLER)
    assert isinstance(cut_off, TurnEnded) and (cut_off.role, cut_off.interrupted) == ("agent", True)
    assert isinstance(ended, CallEnded) and ended.cost == 0.0875


def test_the_turns_are_placed_by_time_whatever_order_they_came_in() -> None:
    payload = load("elevenlabs_post_call_transcription")
    payload["data"]["transcript"].reverse()
    # Still placed by time, but numbered by the place each message has in the reversed post (of 5 entries).
    renumbered = [{**body, "turn": index} for body, index in zip(TURNS, [4, 3, 1, 0], strict=True)]
    assert parse(payload) == [START, *renumbered, END]


def test_the_platforms_own_fiat_total_is_the_cost_where_given() -> None:
    payload = load("elevenlabs_post_call_transcription")
    payload["data"]["metadata"]["cost_fiat"] = 0.0876
    [*_, ended] = bodies(parse(payload))
    assert (ended["cost"], ended["cost_breakdown"]) == (0.0876, {"llm": 0.0042, "platform": 0.0833})


def test_credits_alone_are_no_cost() -> None:
    payload = load("elevenlabs_post_call_transcription")
    charging = payload["data"]["metadata"]["charging"]
    del charging["llm_price"], charging["platform_price"]
    [*_, ended] = bodies(parse(payload))
    assert "cost" not in ended and "cost_breakdown" not in ended


def test_an_outbound_call_dials_from_the_agents_number() -> None:
    payload = load("elevenlabs_post_call_transcription")
    payload["data"]["metadata"]["phone_call"]["direction"] = "outbound"
    [started, *_] = bodies(parse(payload))
    assert (started["from"], started["to"], started["direction"]) == (NUMBER, CALLER, "outbound")
    [event] = validated([started])
    assert isinstance(event, CallStarted) and (event.number, event.caller) == (NUMBER, CALLER)


def test_the_audio_webhook_and_a_web_conversation_are_ignored() -> None:
    assert parse(load("elevenlabs_post_call_audio")) == Ignored("not_a_call_event")
    payload = load("elevenlabs_post_call_transcription")
    del payload["data"]["metadata"]["phone_call"]
    assert parse(payload) == Ignored("not_a_call_event")


@pytest.mark.parametrize(
    ("path", "field"),
    [
        (("type",), "type"),
        (("data",), "data"),
        (("data", "metadata"), "data.metadata"),
        (("data", "conversation_id"), "data.conversation_id"),
        (("data", "metadata", "start_time_unix_secs"), "data.metadata.start_time_unix_secs"),
        (("data", "metadata", "phone_call", "external_number"), "data.metadata.phone_call.external_number"),
        (("data", "metadata", "phone_call", "direction"), "data.metadata.phone_call.direction"),
    ],
)
def test_a_payload_not_elevenlabs_shape_names_the_missing_field(path: tuple[str, ...], field: str) -> None:
    payload = load("elevenlabs_post_call_transcription")
    holder = payload
    for key in path[:-1]:
        holder = holder[key]
    del holder[path[-1]]
    with pytest.raises(InputError) as excinfo:
        parse(payload)
    refused(excinfo, field)


def test_a_message_without_its_time_is_named() -> None:
    payload = load("elevenlabs_post_call_transcription")
    del payload["data"]["transcript"][1]["time_in_call_secs"]
    with pytest.raises(InputError) as excinfo:
        parse(payload)
    refused(excinfo, "data.transcript[1].time_in_call_secs")


def test_no_canary_word_reaches_a_body_but_a_turns_text() -> None:
    parsed = parse(load("elevenlabs_post_call_transcription"))
    assert_private(parsed)
    validated(parsed)
