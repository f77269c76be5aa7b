"""Bland's post-call webhook (the call as `GET /v1/calls/{call_id}` describes it) as event bodies.

Bland posts once, after the call, so one post is the whole call: its start, the turns backfilled from
`transcripts[]` by their `created_at`, then its end (docs/decisions.md, section 16). The summary, the
recording, `concatenated_transcript` and every other free-text field are never read.
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
    invalid,
    iso,
    ms_of,
    number,
    optional_table,
    optional_text,
    pick,
    table,
    text,
)

SOURCE = "bland"
# `robot` (the phone tree Bland met) and `agent-action` (its tool steps) are not the caller or the agent.
ROLES = {"user": "user", "assistant": "agent"}
GEO = {"city": "city", "state": "region", "zip": "zip", "country": "country"}


def parse(payload: Any) -> Parsed:
    """The bodies for one Bland post-call webhook."""
    call = table(payload, "call_id")
    if "category" in call and "transcripts" not in call:
        # One of the live log events (`webhook_events`: level, category, message): no call data in it.
        return IGNORED
    call_id = text(call, "call_id", "call_id")
    return [_started(call, call_id), *_turns(call, call_id), _ended(call, call_id)]


def _time(call: Mapping[str, Any], key: str, path: str) -> str | None:
    value = call.get(key)
    return None if value is None else iso(ms_of(value, path), path)


def _started(call: Mapping[str, Any], call_id: str) -> Body:
    inbound = call.get("inbound")
    if inbound is not None and not isinstance(inbound, bool):
        raise invalid("inbound")
    return compact(
        {
            "type": "call.started",
            "call_id": call_id,
            # Bland names the numbers as dialled, so they are `from` and `to` whichever way the call went.
            "from": text(call, "from", "from"),
            "to": text(call, "to", "to"),
            "direction": None if inbound is None else ("inbound" if inbound else "outbound"),
            "at": _time(call, "started_at", "started_at"),
            "source": SOURCE,
            "attrs": _attrs(call) or None,
        }
    )


def _attrs(call: Mapping[str, Any]) -> dict[str, Any]:
    """`variables.city/state/zip/country` as `geo`, and `answered_by`; nothing else the variables hold."""
    attrs: dict[str, Any] = {}
    variables = optional_table(call, "variables", "variables")
    geo = {name: found for key, name in GEO.items() if (found := optional_text(variables, key)) is not None}
    if geo:
        attrs["geo"] = geo
    answered_by = optional_text(call, "answered_by")
    if answered_by is not None:
        attrs["answered_by"] = answered_by
    return attrs


def _turns(call: Mapping[str, Any], call_id: str) -> list[Body]:
    """Each spoken phrase a `turn.ended` with its text at its `created_at`: Bland gives one time per
    phrase, so no start (and no length) is claimed for it."""

    def read(phrase: Mapping[str, Any], path: str) -> list[tuple[int, Body]]:
        role = pick(ROLES, phrase.get("user"))
        said = phrase.get("text")
        if role is None or not isinstance(said, str):
            return []
        at = ms_of(phrase.get("created_at"), f"{path}.created_at")
        return [(at, {"type": "turn.ended", "call_id": call_id, "role": role, "at": iso(at, path), "text": said})]

    return backfill(call.get("transcripts"), "transcripts", read)


def _ended(call: Mapping[str, Any], call_id: str) -> Body:
    price = call.get("price")
    return compact(
        {
            "type": "call.ended",
            "call_id": call_id,
            "at": _time(call, "end_at", "end_at"),
            "cost": None if price is None else number(price, "price"),
        }
    )
