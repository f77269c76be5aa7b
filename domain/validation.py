"""Event validation and normalisation: a request body in, the typed event to append out.

Only known fields are copied, numbers are normalised to E.164, and turn text is measured here and
dropped: it never reaches the event. A bad body raises `InputError` with the contract's code.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from domain.events import (
    KEY_CREDENTIAL,
    AnyEvent,
    CallEnded,
    CallerInfo,
    CallLabel,
    CallStarted,
    Interruption,
    NumberInfo,
    Transcript,
    TurnEnded,
    TurnStarted,
)
from domain.labels import LABELS
from domain.outbound import Outbound
from domain.phone import Number, parse_number
from domain.policy import Policy
from domain.rules import DAY_MS, LimitRules
from domain.times import parse_ms

EVENT_TYPES = ("call.started", "call.ended", "turn.started", "turn.ended", "interruption", "transcript")
TEXT_TYPES = ("turn.ended", "transcript")
ATTESTATIONS = {"a": "A", "b": "B", "c": "C", "failed": "failed", "none": "none"}
COST_PARTS = ("llm", "stt", "tts", "carrier", "platform")
MAX_ID = 256
MAX_TEXT_FIELD = 256
# Named attrs and their caps (docs/api.md, attrs): every value a fold may copy is bounded here.
MAX_ATTR_TEXT = 128
ATTR_TEXTS = ("caller_name", "answered_by", "carrier")
MAX_MEASURE = 10**9
# One call costs at most this (USD), in total and per part: no event can push spend windows to overflow.
MAX_COST_USD = 1000
# Keys the contract does not name, at the top of `attrs` or inside `geo`, `perf` and `tokens`, are kept on
# the call, up to this many bytes of JSON in all, and read by nothing.
MAX_UNKNOWN_ATTRS_BYTES = 2048
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
    """What the edge adds to every event: its id, the account as of receipt, the receipt time, and the
    credential it came with (`domain.events.KEY_CREDENTIAL`, or a path token's)."""

    id: str
    account_id: str
    plan: str
    received_at: int
    trusted: frozenset[str] = frozenset()
    credential: str = KEY_CREDENTIAL
    policy: Policy | None = None
    # The account's outbound settings and pause (`domain.outbound`), stamped on its outbound starts only.
    outbound: Outbound | None = None


def text_hash(text: str) -> str:
    """First 12 hex of SHA-256 of the case-folded, whitespace-collapsed text (docs/rules.md, The live monitor)."""
    folded = _SPACE.sub(" ", text.casefold()).strip()
    return hashlib.sha256(folded.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class TimeBounds:
    """How far an event's `at` may lie from its receipt (docs/api.md, Time)."""

    max_future_ms: int
    max_live_start_age_ms: int
    max_quiet_age_ms: int

    @classmethod
    def of(cls, limits: LimitRules) -> TimeBounds:
        return cls(
            limits.max_future_at_s * 1000, limits.max_live_start_age_days * DAY_MS, limits.max_quiet_age_days * DAY_MS
        )

    def start_too_old(self, at: int, received_at: int) -> InputError | None:
        """The refusal for a live (not `quiet`) start older than the live bound, else None.

        Only a start: an event of a call that exists is placed by its `at` whatever its age, so a call
        that began yesterday can still end today.
        """
        if received_at - at <= self.max_live_start_age_ms:
            return None
        return InputError(
            "invalid_at", max_age_days=self.max_live_start_age_ms // DAY_MS, hint="use quiet: true to import history"
        )


def parse_event(body: dict[str, Any], stamp: Stamp, bounds: TimeBounds) -> AnyEvent:
    """The event for one body, or InputError with the contract's code."""
    kind = body.get("type")
    if kind not in EVENT_TYPES:
        raise InputError("invalid_type")
    common: dict[str, Any] = {
        "id": stamp.id,
        "account_id": stamp.account_id,
        "plan": stamp.plan,
        "received_at": stamp.received_at,
        "credential": stamp.credential,
        "call_id": _call_id(body),
        "at": _at(body, stamp.received_at, bounds),
    }
    if kind == "call.started":
        started = _started(body, common, stamp)
        refusal = None if started.quiet else bounds.start_too_old(started.at, stamp.received_at)
        if refusal is not None:
            raise refusal
        return started
    if kind == "call.ended":
        return CallEnded(
            **common,
            reason=_short_text(body, "reason", "ended"),
            cost=_cost(body),
            cost_breakdown=_breakdown(body),
            attrs=_attrs(body),
            provider_call_id=_optional_id(body, "provider_call_id"),
            disposition=_label(body, "disposition", required=False),
        )
    return _turn(kind, body, common)


def _label(body: dict[str, Any], name: str, required: bool = True) -> str | None:
    """A label (`domain.labels`): `spam` or `good`; absent or null only where not `required`."""
    value = body.get(name)
    if value is None and not required:
        return None
    if value not in LABELS:
        raise invalid_field(name)
    return str(value)


def parse_label(body: dict[str, Any], stamp: Stamp, call_id: str) -> CallLabel:
    """The owner's label for `call_id` from the body of `POST /v1/calls/<call_id>/label`."""
    for name in body:
        if name != "label":
            raise invalid_field(name)
    if not call_id or len(call_id) > MAX_ID:
        raise invalid_field("call_id")
    return CallLabel(
        id=stamp.id,
        account_id=stamp.account_id,
        call_id=call_id,
        at=stamp.received_at,
        received_at=stamp.received_at,
        plan=stamp.plan,
        credential=stamp.credential,
        label=str(_label(body, "label")),
    )


def _call_id(body: dict[str, Any]) -> str:
    value = body.get("call_id")
    if value is None or value == "":
        raise InputError("missing_call_id")
    if not isinstance(value, str) or len(value) > MAX_ID:
        raise invalid_field("call_id")
    return value


def _at(body: dict[str, Any], received_ms: int, bounds: TimeBounds) -> int:
    raw = body.get("at")
    if raw is None:
        return received_ms
    at = parse_ms(raw)
    if at is None or at > received_ms + bounds.max_future_ms:
        raise InputError("invalid_at")
    if received_ms - at > bounds.max_quiet_age_ms:
        raise InputError("invalid_at", max_age_days=bounds.max_quiet_age_ms // DAY_MS)
    return at


def _number(body: dict[str, Any], name: str) -> Number:
    number = parse_number(body.get(name))
    if number is None:
        raise InputError(f"invalid_{name}")
    return number


def _started(body: dict[str, Any], common: dict[str, Any], stamp: Stamp) -> CallStarted:
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
        trusted=other.e164 in stamp.trusted,
        policy=stamp.policy,
        outbound=stamp.outbound if direction == "outbound" else None,
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
    if value > MAX_COST_USD:
        raise InputError("invalid_field", field=name, limit=MAX_COST_USD)
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
    """The named keys typed and capped; the rest kept as they came, within a small total."""
    value = body.get("attrs")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid_field("attrs")
    attrs: dict[str, Any] = {}
    unknown: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for name, item in value.items():
        if item is None:
            continue
        if name == "attestation":
            if not isinstance(item, str) or item.lower() not in ATTESTATIONS:
                raise invalid_field("attrs.attestation")
            attrs[name] = ATTESTATIONS[item.lower()]
        elif name in ATTR_TEXTS:
            attrs[name] = _attr_text(item, f"attrs.{name}")
        elif name == "transfer":
            # An outbound start that transfers the caller on: `transfer_not_allowed` reads it.
            if not isinstance(item, bool):
                raise invalid_field("attrs.transfer")
            attrs[name] = item
        elif name == "forwarded_from":
            forwarded = parse_number(item)
            if forwarded is None:
                raise invalid_field("attrs.forwarded_from")
            attrs[name] = forwarded.e164
        elif name in TABLES:
            attrs[name], extra = _table(item, f"attrs.{name}", TABLES[name])
            if extra:
                nested[name] = extra
        else:
            unknown[name] = item
    if unknown or nested:
        if len(msgspec.json.encode([unknown, nested])) > MAX_UNKNOWN_ATTRS_BYTES:
            raise InputError("invalid_field", field="attrs", limit=MAX_UNKNOWN_ATTRS_BYTES)
        attrs.update(unknown)
        for name, extra in nested.items():
            attrs[name] = {**attrs[name], **extra}
    return attrs


def _attr_text(value: Any, name: str) -> str:
    if not isinstance(value, str) or len(value) > MAX_ATTR_TEXT:
        raise InputError("invalid_field", field=name, limit=MAX_ATTR_TEXT)
    return value


def _measure(value: Any, name: str) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise invalid_field(name)
    if not 0 <= value <= MAX_MEASURE:
        raise invalid_field(name)
    return value


Check = Callable[[Any, str], Any]
GEO_CHECKS: dict[str, Check] = {key: _attr_text for key in ("city", "region", "zip", "country")}
PERF_CHECKS: dict[str, Check] = {
    **{key: _measure for key in ("turn_ms", "model_ms", "voice_ms", "stt_ms")},
    "interrupted": _count,
}
TOKEN_CHECKS: dict[str, Check] = {key: _count for key in ("in", "out", "cached")}
TABLES = {"geo": GEO_CHECKS, "perf": PERF_CHECKS, "tokens": TOKEN_CHECKS}


def _table(value: Any, name: str, checks: dict[str, Check]) -> tuple[dict[str, Any], dict[str, Any]]:
    """An object of attrs: its named keys, each checked, and the keys the contract does not name."""
    if not isinstance(value, dict):
        raise invalid_field(name)
    table: dict[str, Any] = {}
    unknown: dict[str, Any] = {}
    for key, item in value.items():
        if key not in checks:
            unknown[key] = item
        elif item is not None:
            table[key] = checks[key](item, f"{name}.{key}")
    return table, unknown
