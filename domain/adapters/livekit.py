"""LiveKit's webhook events (protobuf JSON of `livekit.WebhookEvent`: camelCase names, 64-bit integers as
strings, enums by name) as event bodies.

A room is the call (`room.sid`): its SIP participant joining starts it, and that participant leaving or the
room finishing ends it (docs/decisions.md, section 16). Other participants (the agent, web clients) and
every other event map to nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from domain.adapters.base import (
    IGNORED,
    SECOND_MS,
    Body,
    Parsed,
    compact,
    iso,
    member,
    optional_text,
    phone_roles,
    table,
    text,
    whole,
)

SOURCE = "livekit"
# `ParticipantInfo.Kind.SIP`, by name as protobuf JSON writes enums, or by number as some encoders do.
SIP_KINDS = ("SIP", 3)
PHONE_NUMBER = "sip.phoneNumber"
TRUNK_NUMBER = "sip.trunkPhoneNumber"
CALL_ID_FULL = "sip.callIDFull"
# Set only on a call that came in through a dispatch rule: without it the call was dialled out.
RULE_ID = "sip.ruleID"


def parse(payload: Any) -> Parsed:
    """The bodies for one LiveKit webhook event."""
    event = table(payload, "event")
    kind = text(event, "event", "event")
    if kind == "participant_joined":
        participant = member(event, "participant", "participant")
        return [_started(event, participant)] if _is_sip(participant) else IGNORED
    if kind == "participant_left":
        participant = member(event, "participant", "participant")
        if not _is_sip(participant):
            return IGNORED
        return [_ended(event, optional_text(participant, "disconnectReason"))]
    if kind == "room_finished":
        return [_ended(event, None)]
    return IGNORED


def _is_sip(participant: Mapping[str, Any]) -> bool:
    return participant.get("kind") in SIP_KINDS


def _room_sid(event: Mapping[str, Any]) -> str:
    return text(member(event, "room", "room"), "sid", "room.sid")


def _started(event: Mapping[str, Any], participant: Mapping[str, Any]) -> Body:
    attributes = member(participant, "attributes", "participant.attributes")
    other = text(attributes, PHONE_NUMBER, f"participant.attributes.{PHONE_NUMBER}")
    own = text(attributes, TRUNK_NUMBER, f"participant.attributes.{TRUNK_NUMBER}")
    direction = "inbound" if attributes.get(RULE_ID) else "outbound"
    frm, to = phone_roles(direction, other, own)
    return compact(
        {
            "type": "call.started",
            "call_id": _room_sid(event),
            "provider_call_id": optional_text(attributes, CALL_ID_FULL),
            "from": frm,
            "to": to,
            "direction": direction,
            "at": _joined_at(participant),
            "source": SOURCE,
        }
    )


def _joined_at(participant: Mapping[str, Any]) -> str | None:
    """`joinedAt` (seconds); `joinedAtMs`, the same moment to the millisecond, when the server sends it."""
    if participant.get("joinedAtMs") is not None:
        return iso(whole(participant["joinedAtMs"], "participant.joinedAtMs"), "participant.joinedAtMs")
    if participant.get("joinedAt") is not None:
        return iso(whole(participant["joinedAt"], "participant.joinedAt") * SECOND_MS, "participant.joinedAt")
    return None


def _ended(event: Mapping[str, Any], reason: str | None) -> Body:
    created = event.get("createdAt")
    return compact(
        {
            "type": "call.ended",
            "call_id": _room_sid(event),
            # The event's own time (seconds): when the participant left or the room closed.
            "at": None if created is None else iso(whole(created, "createdAt") * SECOND_MS, "createdAt"),
            # `DisconnectReason` by name, as LiveKit sent it (`CLIENT_INITIATED`, `USER_UNAVAILABLE`, ...).
            "reason": reason,
        }
    )
