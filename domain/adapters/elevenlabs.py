"""ElevenLabs' post-call webhook (`{"type": "post_call_transcription", "data": {...}}`, the conversation as
the ElevenLabs SDK's conversation history models) as event bodies.

One post is the whole phone call: its start, the turns backfilled from `transcript[]` by
`time_in_call_secs`, then its end (docs/decisions.md, section 16). The analysis (its summary), the audio
webhook and every other free-text field are never read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from domain.adapters.base import (
    IGNORED,
    SECOND_MS,
    Body,
    Parsed,
    backfill,
    compact,
    invalid,
    iso,
    member,
    number,
    offset_ms,
    optional_table,
    optional_text,
    phone_roles,
    pick,
    table,
    text,
)

DURATION = "data.metadata.call_duration_secs"
SOURCE = "elevenlabs"
ROLES = {"user": "user", "agent": "agent"}
DIRECTIONS = {"inbound": "inbound", "outbound": "outbound"}
# `metadata.charging`'s figures in USD, as the contract's cost parts; its `*_charge` figures (and
# `metadata.cost`) count credits, not money.
FIAT_PARTS = {"llm_price": "llm", "platform_price": "platform"}


def parse(payload: Any) -> Parsed:
    """The bodies for one ElevenLabs post-call webhook."""
    envelope = table(payload, "type")
    kind = text(envelope, "type", "type")
    if kind != "post_call_transcription":
        # post_call_audio (the recording itself), call_initiation_failure: no call to screen.
        return IGNORED
    data = member(envelope, "data", "data")
    metadata = member(data, "metadata", "data.metadata")
    phone_call = optional_table(metadata, "phone_call", "data.metadata.phone_call")
    if phone_call is None:
        # A web or app conversation: no phone numbers.
        return IGNORED
    call_id = text(data, "conversation_id", "data.conversation_id")
    start = round(number(metadata.get("start_time_unix_secs"), "data.metadata.start_time_unix_secs") * SECOND_MS)
    return [
        _started(call_id, start, phone_call),
        *_turns(data, call_id, start),
        _ended(call_id, start, metadata, phone_call),
    ]


def _started(call_id: str, start: int, phone_call: Mapping[str, Any]) -> Body:
    path = "data.metadata.phone_call"
    direction = pick(DIRECTIONS, phone_call.get("direction"))
    if direction is None:
        raise invalid(f"{path}.direction")
    frm, to = phone_roles(
        direction,
        text(phone_call, "external_number", f"{path}.external_number"),
        text(phone_call, "agent_number", f"{path}.agent_number"),
    )
    return compact(
        {
            "type": "call.started",
            "call_id": call_id,
            "provider_call_id": optional_text(phone_call, "call_sid"),
            "from": frm,
            "to": to,
            "direction": direction,
            "at": iso(start, "data.metadata.start_time_unix_secs"),
            "source": SOURCE,
        }
    )


def _turns(data: Mapping[str, Any], call_id: str, start: int) -> list[Body]:
    """Each spoken message a `turn.ended` with its text (and `interrupted`) at `time_in_call_secs`:
    ElevenLabs gives one time per message, so no start (and no length) is claimed for it."""

    def read(message: Mapping[str, Any], path: str) -> list[tuple[int, Body]]:
        role = pick(ROLES, message.get("role"))
        said = message.get("message")
        # A tool call or its result is an entry with no message: nobody spoke.
        if role is None or not isinstance(said, str):
            return []
        at = offset_ms(start, message.get("time_in_call_secs"), f"{path}.time_in_call_secs")
        interrupted = message.get("interrupted")
        body: Body = {"type": "turn.ended", "call_id": call_id, "role": role, "at": iso(at, path), "text": said}
        if isinstance(interrupted, bool):
            body["interrupted"] = interrupted
        return [(at, body)]

    return backfill(data.get("transcript"), "data.transcript", read)


def _ended(call_id: str, start: int, metadata: Mapping[str, Any], phone_call: Mapping[str, Any]) -> Body:
    duration = metadata.get("call_duration_secs")
    cost, breakdown = _cost(metadata)
    return compact(
        {
            "type": "call.ended",
            "call_id": call_id,
            "provider_call_id": optional_text(phone_call, "call_sid"),
            "at": None if duration is None else iso(offset_ms(start, duration, DURATION), DURATION),
            "reason": optional_text(metadata, "termination_reason"),
            "cost": cost,
            "cost_breakdown": breakdown,
        }
    )


def _cost(metadata: Mapping[str, Any]) -> tuple[float | None, dict[str, float] | None]:
    """The call's cost in USD and its parts, from the fiat figures where ElevenLabs gives them:
    `metadata.cost_fiat` (its own total of the two) or else the sum of `charging`'s prices."""
    charging = optional_table(metadata, "charging", "data.metadata.charging")
    parts = {
        part: number(charging[key], f"data.metadata.charging.{key}")
        for key, part in FIAT_PARTS.items()
        if charging is not None and charging.get(key) is not None
    }
    total = metadata.get("cost_fiat")
    if total is not None:
        return number(total, "data.metadata.cost_fiat"), parts or None
    return (round(sum(parts.values()), 6) if parts else None), parts or None
