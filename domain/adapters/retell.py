"""Retell's call webhooks (`{"event": ..., "call": {...}}`, the call as the Retell SDK's `PhoneCallResponse`).

`call_started` starts the call. `call_ended` carries the whole call, so it appends the start again (a
duplicate when `call_started` came, the start itself when it did not), the turns backfilled from
`transcript_object` and then the end (docs/decisions.md, section 16). Analysis, recordings, the plain
`transcript` and the scrubbed copies are never read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from domain.adapters.base import (
    IGNORED,
    Body,
    Parsed,
    backfill,
    compact,
    iso,
    member,
    number,
    offset_ms,
    optional_number,
    optional_table,
    optional_text,
    pick,
    table,
    text,
)

SOURCE = "retell"
# `transfer_target` (the party a call was handed to) is neither the caller nor the agent.
ROLES = {"agent": "agent", "user": "user"}
CENTS = 100


def parse(payload: Any) -> Parsed:
    """The bodies for one Retell webhook."""
    body = table(payload, "event")
    event = text(body, "event", "event")
    call = member(body, "call", "call")
    if event not in ("call_started", "call_ended"):
        # call_analyzed, transcript_updated and the transfer events: nothing the contract maps.
        return IGNORED
    if call.get("call_type") == "web_call":
        return IGNORED
    started = _started(call)
    if event == "call_started":
        return [started]
    return [started, *_turns(call), _ended(call)]


def _ms(call: Mapping[str, Any], key: str) -> int | None:
    value = optional_number(call, key, f"call.{key}")
    return None if value is None else round(value)


def _provider_call_id(call: Mapping[str, Any]) -> str | None:
    telephony = optional_table(call, "telephony_identifier", "call.telephony_identifier")
    return optional_text(telephony, "twilio_call_sid")


def _started(call: Mapping[str, Any]) -> Body:
    start = _ms(call, "start_timestamp")
    return compact(
        {
            "type": "call.started",
            "call_id": text(call, "call_id", "call.call_id"),
            "provider_call_id": _provider_call_id(call),
            # Retell names the numbers as dialled, so they are `from` and `to` whichever way the call went.
            "from": text(call, "from_number", "call.from_number"),
            "to": text(call, "to_number", "call.to_number"),
            # Retell's own values are the contract's; anything else is validation's `invalid_direction`.
            "direction": optional_text(call, "direction"),
            "at": None if start is None else iso(start, "call.start_timestamp"),
            "source": SOURCE,
        }
    )


def _turns(call: Mapping[str, Any]) -> list[Body]:
    """Each utterance a start at its first word's `start` and an end (with its text) at its last word's
    `end`, seconds after `start_timestamp`; without those times an utterance cannot be placed."""
    start = _ms(call, "start_timestamp")
    if start is None:
        return []
    call_id = text(call, "call_id", "call.call_id")

    def read(utterance: Mapping[str, Any], path: str) -> list[tuple[int, Body]]:
        role = pick(ROLES, utterance.get("role"))
        words = utterance.get("words")
        if role is None or not isinstance(words, list):
            return []
        begins = [w["start"] for w in words if isinstance(w, Mapping) and w.get("start") is not None]
        ends = [w["end"] for w in words if isinstance(w, Mapping) and w.get("end") is not None]
        if not begins or not ends:
            return []
        began = offset_ms(start, begins[0], f"{path}.words.start")
        ended = offset_ms(start, ends[-1], f"{path}.words.end")
        said = utterance.get("content")
        started = {"type": "turn.started", "call_id": call_id, "role": role, "at": iso(began, path)}
        ending = {"type": "turn.ended", "call_id": call_id, "role": role, "at": iso(ended, path)}
        return [(began, started), (ended, compact({**ending, "text": said if isinstance(said, str) else None}))]

    return backfill(call.get("transcript_object"), "call.transcript_object", read)


def _ended(call: Mapping[str, Any]) -> Body:
    end = _ms(call, "end_timestamp")
    cost = optional_table(call, "call_cost", "call.call_cost")
    cents = None if cost is None else cost.get("combined_cost")
    return compact(
        {
            "type": "call.ended",
            "call_id": text(call, "call_id", "call.call_id"),
            "provider_call_id": _provider_call_id(call),
            "at": None if end is None else iso(end, "call.end_timestamp"),
            "reason": optional_text(call, "disconnection_reason"),
            # Retell counts in cents; the contract in USD (rounded off float noise, to a millionth).
            "cost": None if cents is None else round(number(cents, "call.call_cost.combined_cost") / CENTS, 6),
        }
    )
