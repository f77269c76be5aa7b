"""Twilio's voice webhook and status callback (its form, as `dict[str, str]`) as event bodies.

A `ringing` or `in-progress` call starts it, with the carrier gate's attrs translations (domain.gate);
a final status ends it (docs/decisions.md, sections 12 and 16). The `CallSid` is both the call's id and
the carrier's, so a call the gate screened and the same call reported here fold into one record.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any

from domain import gate
from domain.adapters.base import IGNORED, Body, Parsed, compact, invalid, iso, table, text

SOURCE = "twilio"
STARTING = frozenset({"ringing", "in-progress"})


def parse(payload: Any) -> Parsed:
    """The bodies for one Twilio voice webhook or status callback form."""
    form = table(payload, "CallSid")
    call_sid = text(form, "CallSid", "CallSid")
    status = text(form, "CallStatus", "CallStatus")
    if status in STARTING:
        return [_started(form, call_sid)]
    ended = gate.ended_body(form)
    if ended is None:
        # queued, initiated: nothing has happened to screen yet.
        return IGNORED
    return [compact({**ended, "provider_call_id": call_sid, "at": _at(form)})]


def _started(form: Mapping[str, str], call_sid: str) -> Body:
    # `inbound`, or `outbound-api` / `outbound-dial` for a call the account placed; a form without one
    # (another carrier posting the same parameters) leaves the contract's default, inbound.
    direction = form.get("Direction") or None
    outbound = direction is not None and direction.startswith("outbound")
    return compact(
        {
            "type": "call.started",
            "call_id": call_sid,
            "provider_call_id": call_sid,
            "from": text(form, "From", "From"),
            "to": text(form, "To", "To"),
            "direction": None if direction is None else ("outbound" if outbound else "inbound"),
            "at": _at(form),
            "source": SOURCE,
            # The caller's STIR result, geography and name describe the party that dialled: on a call the
            # account placed that is the account's own number, so only the carrier is said.
            "attrs": {"carrier": gate.CARRIER} if outbound else gate.attrs_of(form),
        }
    )


def _at(form: Mapping[str, str]) -> str | None:
    """A status callback's `Timestamp` (RFC 2822); a voice webhook has none, so the receipt time stands."""
    stamp = form.get("Timestamp")
    if not stamp:
        return None
    try:
        moment = parsedate_to_datetime(stamp)
    except (TypeError, ValueError):
        raise invalid("Timestamp") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return iso(round(moment.timestamp() * 1000), "Timestamp")
