"""LiveKit's webhook events as event bodies (domain.adapters.livekit).

Payload shapes follow `livekit.WebhookEvent`, `Room` and `ParticipantInfo` in github.com/livekit/protocol
(protobufs/livekit_webhook.proto, protobufs/livekit_models.proto) as protobuf JSON (camelCase, int64 as
strings, enums by name), with the SIP participant attributes of livekit/attrs.go (`sip.phoneNumber`,
`sip.trunkPhoneNumber`, `sip.ruleID`) and LiveKit SIP's `sip.callIDFull`
(docs.livekit.io/home/server/webhooks, docs.livekit.io/sip/sip-participant).
"""

from __future__ import annotations

import pytest

from domain.adapters import PARSERS, Ignored
from domain.events import CallEnded, CallStarted
from domain.validation import InputError
from tests.unit.adapters.adapter_checks import assert_private, bodies, load, refused, validated

parse = PARSERS["livekit"]
ROOM = "RM_tkGHfLjK8dVc"
NUMBER = "+14155550100"
CALLER = "+16465550123"


def test_a_sip_caller_joining_starts_an_inbound_call() -> None:
    parsed = parse(load("livekit_participant_joined_sip_inbound"))
    assert parsed == [
        {
            "type": "call.started",
            "call_id": ROOM,
            "provider_call_id": "5b3c1e9f7a2d4c6e8f0a1b2c3d4e5f60@0.0.0.0",
            "from": CALLER,
            "to": NUMBER,
            "direction": "inbound",
            # joinedAtMs: the same moment as joinedAt ("1748856600"), to the millisecond.
            "at": "2025-06-02T09:30:00.180Z",
            "source": "livekit",
        }
    ]
    [started] = validated(parsed)
    assert isinstance(started, CallStarted)
    assert (started.number, started.caller) == (NUMBER, CALLER)


def test_a_sip_participant_without_a_dispatch_rule_was_dialled_out() -> None:
    parsed = parse(load("livekit_participant_joined_sip_outbound"))
    assert parsed == [
        {
            "type": "call.started",
            "call_id": "RM_Pz4kW8nQe2Ld",
            "from": NUMBER,
            "to": CALLER,
            "direction": "outbound",
            # Only joinedAt, in seconds.
            "at": "2025-06-02T09:30:00.000Z",
            "source": "livekit",
        }
    ]
    [started] = validated(parsed)
    assert isinstance(started, CallStarted)
    assert (started.number, started.caller) == (NUMBER, CALLER)


def test_the_sip_participant_leaving_ends_the_call() -> None:
    parsed = parse(load("livekit_participant_left_sip"))
    assert parsed == [
        {"type": "call.ended", "call_id": ROOM, "at": "2025-06-02T09:30:42.000Z", "reason": "CLIENT_INITIATED"}
    ]
    [ended] = validated(parsed)
    assert isinstance(ended, CallEnded) and ended.reason == "CLIENT_INITIATED"


def test_the_room_finishing_ends_the_call() -> None:
    parsed = parse(load("livekit_room_finished"))
    assert parsed == [{"type": "call.ended", "call_id": ROOM, "at": "2025-06-02T09:31:03.000Z"}]
    validated(parsed)


def test_a_sip_kind_by_number_is_a_sip_participant() -> None:
    payload = load("livekit_participant_joined_sip_inbound")
    payload["participant"]["kind"] = 3
    [started] = bodies(parse(payload))
    assert started["call_id"] == ROOM


@pytest.mark.parametrize("name", ["livekit_participant_joined_agent", "livekit_egress_ended"])
def test_events_that_map_to_no_event_are_ignored(name: str) -> None:
    assert parse(load(name)) == Ignored("not_a_call_event")


def test_another_participant_leaving_is_ignored() -> None:
    payload = load("livekit_participant_joined_agent")
    payload["event"] = "participant_left"
    assert parse(payload) == Ignored("not_a_call_event")


def test_a_standard_participant_whose_kind_protobuf_json_left_out_is_ignored() -> None:
    payload = load("livekit_participant_joined_agent")
    del payload["participant"]["kind"]
    assert parse(payload) == Ignored("not_a_call_event")


@pytest.mark.parametrize(
    ("missing", "field"),
    [
        ("sip.phoneNumber", "participant.attributes.sip.phoneNumber"),
        ("sip.trunkPhoneNumber", "participant.attributes.sip.trunkPhoneNumber"),
    ],
)
def test_a_sip_participant_without_its_numbers_names_the_field(missing: str, field: str) -> None:
    payload = load("livekit_participant_joined_sip_inbound")
    del payload["participant"]["attributes"][missing]
    with pytest.raises(InputError) as excinfo:
        parse(payload)
    refused(excinfo, field)


@pytest.mark.parametrize(
    ("name", "path", "field"),
    [
        ("livekit_participant_joined_sip_inbound", ("event",), "event"),
        ("livekit_participant_joined_sip_inbound", ("participant",), "participant"),
        ("livekit_participant_joined_sip_inbound", ("room", "sid"), "room.sid"),
        ("livekit_room_finished", ("room",), "room"),
    ],
)
def test_a_payload_not_livekits_shape_names_the_missing_field(name: str, path: tuple[str, ...], field: str) -> None:
    payload = load(name)
    holder = payload
    for key in path[:-1]:
        holder = holder[key]
    del holder[path[-1]]
    with pytest.raises(InputError) as excinfo:
        parse(payload)
    refused(excinfo, field)


def test_a_64_bit_time_that_is_no_number_is_named() -> None:
    payload = load("livekit_room_finished")
    payload["createdAt"] = "soon"
    with pytest.raises(InputError) as excinfo:
        parse(payload)
    refused(excinfo, "createdAt")


def test_no_canary_word_reaches_a_body() -> None:
    for name in ("livekit_participant_joined_sip_inbound", "livekit_participant_left_sip", "livekit_room_finished"):
        parsed = parse(load(name))
        assert_private(parsed)
        validated(parsed)
