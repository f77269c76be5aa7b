"""Event validation and normalisation: a request body in, the typed event to append out.

Only known fields are copied, numbers are normalised to E.164, and turn text is measured here and
dropped: it never reaches the event. A bad body raises `InputError` with the contract's code.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Any

from domain.events import (
    AnyEvent,
    CallEnded,
    CallerInfo,
    CallStarted,
    Interruption,
    NumberInfo,
    Transcript,
    TurnEnded,
    TurnStarted,
)
from domain.phone import Number, parse_number
from domain.times import parse_ms

EVENT_TYPES = ("call.started", "call.ended", "turn.started", "turn.ended", "interruption", "transcript")
TEXT_TYPES = ("turn.ended", "transcript")
ATTESTATIONS = {"a": "A", "b": "B", "c": "C", "failed": "failed", "none": "none"}
COST_PARTS = ("llm", "stt", "tts", "carrier", "platform")
MAX_ID = 256
MAX_TEXT_FIELD = 256
_SPACE = re.compile(r"\s+")


class InputError(Exception):
    """A request the contract refuses: its status, `error` code and context fields."""

    def __init__(self, code: str, status: int = 400, **context: Any) -> None:
        super().__init__(code)
        self.code = code
        self.status = status
        self.context = context


def invalid_field(field: str) -> InputError:
    return InputError("invalid_field", field=field)


@dataclass(frozen=True)
class Stamp:
    """What the edge adds to every event: its id, the account as of receipt, and the receipt time."""

    id: str
    account_id: str
    plan: str
    received_at: int
    trusted: frozenset[str] = frozenset()


def text_hash(text: str) -> str:
    """First 12 hex of SHA-256 of the case-folded, whitespace-collapsed text (docs/rules.md, The live monitor)."""
    folded = _SPACE.sub(" ", text.casefold()).strip()
    return hashlib.sha256(folded.encode()).hexdigest()[:12]


def parse_event(body: dict[str, Any], stamp: Stamp, max_future_ms: int) -> AnyEvent:
    """The event for one body, or InputError with the contract's code."""
    kind = body.get("type")
    if kind not in EVENT_TYPES:
        raise InputError("invalid_type")
    common: dict[str, Any] = {
        "id": stamp.id,
        "account_id": stamp.account_id,
        "plan": stamp.plan,
        "received_at": stamp.received_at,
        "call_id": _call_id(body),
        "at": _at(body, stamp.received_at, max_future_ms),
    }
    if kind == "call.started":
        return _started(body, common, stamp.trusted)
    if kind == "call.ended":
        return CallEnded(
            **common,
            reason=_short_text(body, "reason", "ended"),
            cost=_cost(body),
            cost_breakdown=_breakdown(body),
            attrs=_attrs(body),
            provider_call_id=_optional_id(body, "provider_call_id"),
        )
    return _turn(kind, body, common)


def _call_id(body: dict[str, Any]) -> str:
    value = body.get("call_id")
    if value is None or value == "":
        raise InputError("missing_call_id")
    if not isinstance(value, str) or len(value) > MAX_ID:
        raise invalid_field("call_id")
    return value


def _at(body: dict[str, Any], received_ms: int, max_future_ms: int) -> int:
    raw = body.get("at")
    if raw is None:
        return received_ms
    at = parse_ms(raw)
    if at is None or at > received_ms + max_future_ms:
        raise InputError("invalid_at")
    return at


def _number(body: dict[str, Any], name: str) -> Number:
    number = parse_number(body.get(name))
    if number is None:
        raise InputError(f"invalid_{name}")
    return number


def _started(body: dict[str, Any], common: dict[str, Any], trusted: frozenset[str]) -> CallStarted:
    to = _number(body, "to")
    frm = _number(body, "from")
    direction = body.get("direction", "inbound")
    if direction is None:
        direction = "inbound"
    if direction not in ("inbound", "outbound"):
        raise InputError("invalid_direction")
    protected, other = (to, frm) if direction == "inbound" else (frm, to)
    return CallStarted(
        **common,
        to=to.e164,
        from_=frm.e164,
        direction=direction,
        number=protected.e164,
        caller=other.e164,
        number_info=NumberInfo(country=protected.country, national=protected.national),
        caller_info=CallerInfo(
            country=other.country, national=other.national, valid=other.valid, premium=other.premium
        ),
        register=_bool(body, "register", True),
        quiet=_bool(body, "quiet", False),
        source=_short_text(body, "source", "api"),
        cost=_cost(body),
        cost_breakdown=_breakdown(body),
        attrs=_attrs(body),
        provider_call_id=_optional_id(body, "provider_call_id"),
        trusted=other.e164 in trusted,
    )


TURN_EVENTS: dict[str, type[TurnStarted | TurnEnded | Interruption | Transcript]] = {
    "turn.started": TurnStarted,
    "turn.ended": TurnEnded,
    "interruption": Interruption,
    "transcript": Transcript,
}


def _turn(
    kind: str, body: dict[str, Any], common: dict[str, Any]
) -> TurnStarted | TurnEnded | Interruption | Transcript:
    fields: dict[str, Any] = {}
    role = body.get("role")
    if kind == "interruption":
        fields["role"] = "user"
    elif role in ("user", "agent"):
        fields["role"] = role
    else:
        raise InputError("invalid_role")
    if body.get("turn") is not None:
        fields["turn"] = _count(body["turn"], "turn")
    for name in ("chars", "words"):
        if body.get(name) is not None:
            fields[name] = _count(body[name], name)
    if kind in TEXT_TYPES and body.get("text") is not None:
        text = body["text"]
        if not isinstance(text, str):
            raise invalid_field("text")
        fields.update(chars=len(text), words=len(text.split()), hash=text_hash(text))
    interrupted = body.get("interrupted")
    if interrupted is not None:
        if not isinstance(interrupted, bool):
            raise invalid_field("interrupted")
        fields["interrupted"] = interrupted
    return TURN_EVENTS[kind](**common, **fields)


def _count(value: Any, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0 or value > 10**9:
        raise invalid_field(name)
    return value


def _bool(body: dict[str, Any], name: str, default: bool) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise invalid_field(name)
    return value


def _short_text(body: dict[str, Any], name: str, default: str) -> str:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, str) or len(value) > MAX_TEXT_FIELD:
        raise invalid_field(name)
    return value


def _optional_id(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_ID:
        raise invalid_field(name)
    return value


def _money(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise invalid_field(name)
    return float(value)


def _cost(body: dict[str, Any]) -> float | None:
    value = body.get("cost")
    return None if value is None else _money(value, "cost")


def _breakdown(body: dict[str, Any]) -> dict[str, float] | None:
    value = body.get("cost_breakdown")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise invalid_field("cost_breakdown")
    parts: dict[str, float] = {}
    for key, amount in value.items():
        if key not in COST_PARTS:
            raise invalid_field(f"cost_breakdown.{key}")
        if amount is not None:
            parts[key] = _money(amount, f"cost_breakdown.{key}")
    return parts


def _attrs(body: dict[str, Any]) -> dict[str, Any]:
    value = body.get("attrs")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid_field("attrs")
    attrs = dict(value)
    attestation = attrs.get("attestation")
    if attestation is not None:
        if not isinstance(attestation, str) or attestation.lower() not in ATTESTATIONS:
            raise invalid_field("attrs.attestation")
        attrs["attestation"] = ATTESTATIONS[attestation.lower()]
    for name in ("geo", "perf", "tokens"):
        if name in attrs and attrs[name] is not None and not isinstance(attrs[name], dict):
            raise invalid_field(f"attrs.{name}")
    forwarded = attrs.get("forwarded_from")
    if forwarded is not None and not isinstance(forwarded, str):
        raise invalid_field("attrs.forwarded_from")
    return attrs
