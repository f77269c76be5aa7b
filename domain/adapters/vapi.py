"""Vapi's server messages (`{"message": {...}}`, the Vapi server SDK's `ServerMessage`) as event bodies.

`status-update` in progress starts the call, `speech-update`, `user-interrupted` and final `transcript`
messages are its turns as they happen, and `end-of-call-report` ends it (docs/decisions.md, section 16).
Summaries, recordings and the report's transcript are never read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from domain.adapters.base import (
    IGNORED,
    Body,
    Parsed,
    compact,
    invalid,
    iso,
    member,
    ms_of,
    number,
    optional_table,
    optional_text,
    phone_roles,
    pick,
    table,
    text,
)

SOURCE = "vapi"
DIRECTIONS = {"inboundPhoneCall": "inbound", "outboundPhoneCall": "outbound"}
ROLES = {"assistant": "agent", "user": "user"}
SPEECH = {"started": "turn.started", "stopped": "turn.ended"}
FINAL_TRANSCRIPT = 'transcript[transcriptType="final"]'
# `costBreakdown` keys as the contract's parts; `total`, `chat` and the token counts are no part.
COST_PARTS = {"transport": "carrier", "stt": "stt", "llm": "llm", "tts": "tts", "vapi": "platform"}


def parse(payload: Any) -> Parsed:
    """The bodies for one Vapi server message."""
    message = member(table(payload, "message"), "message", "message")
    kind = text(message, "type", "message.type")
    call = optional_table(message, "call", "message.call")
    if call is not None and call.get("type") is not None and pick(DIRECTIONS, call["type"]) is None:
        # A web or websocket call has no phone numbers: nothing to screen.
        return IGNORED
    if kind == "status-update":
        return [_started(message)] if message.get("status") == "in-progress" else IGNORED
    if kind == "speech-update":
        return _speech(message)
    if kind == "user-interrupted":
        return [compact({"type": "interruption", "call_id": _call_id(message), "at": _at(message)})]
    if kind in ("transcript", FINAL_TRANSCRIPT):
        return _transcript(message, kind)
    if kind == "end-of-call-report":
        return [_ended(message)]
    return IGNORED


def _call(message: Mapping[str, Any]) -> Mapping[str, Any]:
    return member(message, "call", "message.call")


def _call_id(message: Mapping[str, Any]) -> str:
    return text(_call(message), "id", "message.call.id")


def _at(message: Mapping[str, Any]) -> str | None:
    """The message's `timestamp` (epoch milliseconds), when it carries one."""
    value = message.get("timestamp")
    return None if value is None else iso(round(number(value, "message.timestamp")), "message.timestamp")


def _party(message: Mapping[str, Any], key: str) -> str:
    """`customer.number` or `phoneNumber.number`: on the message, else on its call (the same objects)."""
    for holder, prefix in ((message, "message"), (_call(message), "message.call")):
        found = optional_text(optional_table(holder, key, f"{prefix}.{key}"), "number")
        if found is not None:
            return found
    raise invalid(f"message.{key}.number")


def _started(message: Mapping[str, Any]) -> Body:
    call = _call(message)
    direction = pick(DIRECTIONS, call.get("type"))
    if direction is None:
        raise invalid("message.call.type")
    frm, to = phone_roles(direction, _party(message, "customer"), _party(message, "phoneNumber"))
    return compact(
        {
            "type": "call.started",
            "call_id": _call_id(message),
            "provider_call_id": optional_text(call, "phoneCallProviderId"),
            "from": frm,
            "to": to,
            "direction": direction,
            "at": _at(message),
            "source": SOURCE,
        }
    )


def _speech(message: Mapping[str, Any]) -> Parsed:
    role = pick(ROLES, message.get("role"))
    kind = pick(SPEECH, message.get("status"))
    if role is None or kind is None:
        return IGNORED
    turn = message.get("turn")
    # Vapi numbers its turns from 0 (a JSON number); the contract's `turn` is a plain index.
    index = round(number(turn, "message.turn")) if turn is not None else None
    return [compact({"type": kind, "call_id": _call_id(message), "role": role, "turn": index, "at": _at(message)})]


def _transcript(message: Mapping[str, Any], kind: str) -> Parsed:
    """A final transcript's text, which validation measures and drops; a partial one is no event."""
    if kind != FINAL_TRANSCRIPT and message.get("transcriptType") != "final":
        return IGNORED
    role = pick(ROLES, message.get("role"))
    if role is None:
        return IGNORED
    words = message.get("transcript")
    if not isinstance(words, str):
        raise invalid("message.transcript")
    return [
        compact({"type": "transcript", "call_id": _call_id(message), "role": role, "at": _at(message), "text": words})
    ]


def _ended(message: Mapping[str, Any]) -> Body:
    call = _call(message)
    ended_at = message.get("endedAt")
    cost = message.get("cost")
    return compact(
        {
            "type": "call.ended",
            "call_id": _call_id(message),
            "provider_call_id": optional_text(call, "phoneCallProviderId"),
            "at": None if ended_at is None else iso(ms_of(ended_at, "message.endedAt"), "message.endedAt"),
            "reason": optional_text(message, "endedReason"),
            "cost": None if cost is None else number(cost, "message.cost"),
            "cost_breakdown": _breakdown(message, call),
        }
    )


def _breakdown(message: Mapping[str, Any], call: Mapping[str, Any]) -> dict[str, float] | None:
    """`costBreakdown` in the contract's parts: the report's own, else its call's (the SDK's `Call`)."""
    for holder, prefix in ((message, "message"), (call, "message.call")):
        found = optional_table(holder, "costBreakdown", f"{prefix}.costBreakdown")
        if found is not None:
            parts = {
                part: number(found[key], f"{prefix}.costBreakdown.{key}")
                for key, part in COST_PARTS.items()
                if found.get(key) is not None
            }
            return parts or None
    return None
