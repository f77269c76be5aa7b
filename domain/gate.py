"""The carrier gate's translations (docs/api.md, The carrier gate): the carrier's voice-webhook form into
the event bodies `POST /v1/events` takes, and the names of what the gate decides.

The forms are Twilio's (and any carrier that posts the same parameters); the bodies go through
`domain.validation.parse_event` like any client's, so a gated call is checked, normalised and folded
exactly as a platform's report of it would be.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from domain.phone import parse_number

# The challenge's answers, and the reasons a call the gate ends is given.
GATE_PASS = "pass"
GATE_FAIL = "gate_fail"
GATE_TIMEOUT = "gate_timeout"
GATE_REJECTED = "rejected"
GATE_ENDED = "ended"
SOURCE = "gate"
CARRIER = "twilio"
# Twilio's CallStatus values that end a call; any other status callback changes nothing.
FINAL_STATUSES = frozenset({"completed", "busy", "no-answer", "failed", "canceled"})
PASSED = "TN-Validation-Passed-"
FAILED = "TN-Validation-Failed"
GEO = {"FromCity": "city", "FromState": "region", "FromZip": "zip", "FromCountry": "country"}
# Twilio's account ids: it goes into the REST API's path, so anything else is no account at all.
ACCOUNT_SID = re.compile(r"AC[0-9a-fA-F]{32}")


def attestation(stir_verstat: str | None) -> str:
    """`StirVerstat` as an attestation: `TN-Validation-Passed-A|B|C` → `A|B|C`, `TN-Validation-Failed-*`
    → `failed`, anything else (`No-TN-Validation`, absent) → `none`."""
    value = stir_verstat or ""
    if value.startswith(PASSED) and value[len(PASSED) :] in ("A", "B", "C"):
        return value[len(PASSED) :]
    if value.startswith(FAILED):
        return "failed"
    return "none"


def attrs_of(form: Mapping[str, str]) -> dict[str, Any]:
    """The carrier's information about the caller, as the attrs of a `call.started`."""
    attrs: dict[str, Any] = {"attestation": attestation(form.get("StirVerstat")), "carrier": CARRIER}
    geo = {name: form[param] for param, name in GEO.items() if form.get(param)}
    if geo:
        attrs["geo"] = geo
    if form.get("CallerName"):
        attrs["caller_name"] = form["CallerName"]
    if parse_number(form.get("ForwardedFrom")) is not None:
        # A forwarding number the carrier sent that cannot be read is left out: the call is still screened.
        attrs["forwarded_from"] = form["ForwardedFrom"]
    return attrs


def started_body(form: Mapping[str, str], number: str) -> dict[str, Any]:
    """The `call.started` body for the carrier's incoming-call form. The called number is the one the gate
    token belongs to, whatever `To` says: a token opens its own number only."""
    call_sid = form.get("CallSid")
    return {
        "type": "call.started",
        "call_id": call_sid,
        "provider_call_id": call_sid,
        "to": number,
        "from": form.get("From"),
        "direction": "inbound",
        "source": SOURCE,
        "attrs": attrs_of(form),
    }


def ended_body(form: Mapping[str, str]) -> dict[str, Any] | None:
    """The `call.ended` body for a status callback, or None when its status does not end the call."""
    status = form.get("CallStatus", "")
    if status not in FINAL_STATUSES:
        return None
    return {"type": "call.ended", "call_id": form.get("CallSid"), "reason": status}


def duration_of(form: Mapping[str, str]) -> int | None:
    """The carrier's `CallDuration` in whole seconds, when it sent a plain one."""
    value = form.get("CallDuration", "")
    return int(value) if value.isdigit() and len(value) <= 9 else None


def hang_up_account(form: Mapping[str, str], signed: bool, wanted: bool) -> str | None:
    """The carrier account (`AccountSid`) whose call the gate may later end, or None.

    Only a form whose `X-Twilio-Signature` verified with the number's own carrier auth token (`signed`)
    names a CallSid and AccountSid the carrier vouched for; an unsigned form could name anybody's call,
    so a number that wants hang-ups (`wanted`) gets none without its token."""
    if not (wanted and signed):
        return None
    account = form.get("AccountSid", "")
    return account if ACCOUNT_SID.fullmatch(account) else None
