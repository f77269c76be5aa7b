"""Records on the events topic (schemas/events.schema.json), as frozen typed structs.

The edge makes them from validated request bodies (`domain.validation`); the worker's sweep adds
`Tick`s. `decode_event` reads one back; a record it cannot read is not an event.
"""

from __future__ import annotations

from typing import Any

import msgspec

from domain.outbound import Outbound
from domain.policy import Policy


class NumberInfo(msgspec.Struct, frozen=True, gc=False):
    country: str
    national: str


class CallerInfo(msgspec.Struct, frozen=True, gc=False):
    country: str
    national: str
    valid: bool
    premium: bool


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", gc=False):
    """What every record carries: its own id, the call it belongs to, and its time in event time."""

    id: str
    account_id: str
    call_id: str
    at: int
    received_at: int | None = None
    plan: str = ""
    # What posted it, as the edge authenticated it: `key` (an API key), or a token in the path, `ingest` or
    # `gate`. A token's evidence weighs less in the network's (docs/rules.md, Network evidence); a record
    # written before the field, or made by a worker (a tick), is a key's.
    credential: str = "key"


# An event's `credential`: an API key's, or a path token's (the account's ingest token, a number's gate token).
KEY_CREDENTIAL = "key"
INGEST_CREDENTIAL = "ingest"
GATE_CREDENTIAL = "gate"


class CallStarted(Event, frozen=True, kw_only=True, tag="call.started"):
    to: str
    from_: str = msgspec.field(name="from")
    direction: str = "inbound"
    number: str
    caller: str
    number_info: NumberInfo
    caller_info: CallerInfo
    register: bool = True
    quiet: bool = False
    source: str = "api"
    cost: float | None = None
    cost_breakdown: dict[str, float] | None = None
    attrs: dict[str, Any] = msgspec.field(default_factory=dict)
    provider_call_id: str | None = None
    trusted: bool = False
    # The gate's keypress challenge digit, drawn by the edge for a call the carrier reported; it lives in
    # the call's state and is never in a URL (docs/api.md, The carrier gate).
    gate_digit: str | None = None
    # Set by the edge for a gated call on a number with `hang_up_suspicious` (Guard plan) whose form the
    # carrier signed: the call's first alert-level live flag ends it through the carrier.
    hang_up: bool = False
    # The signed form's `AccountSid` on such a call: the carrier account the hang-up is asked of.
    carrier_account_sid: str | None = None
    # The account's scoring policy as of receipt (`domain.policy`), absent while it has none: a refold
    # scores the start with the policy it was answered with, and a shadow run swaps in its candidate.
    policy: Policy | None = None
    # On an outbound start, the account's outbound settings and pause as of receipt (`domain.outbound`),
    # absent while they are the defaults: a refold answers the start as it was answered.
    outbound: Outbound | None = None


class CallEnded(Event, frozen=True, kw_only=True, tag="call.ended"):
    reason: str = "ended"
    cost: float | None = None
    cost_breakdown: dict[str, float] | None = None
    attrs: dict[str, Any] = msgspec.field(default_factory=dict)
    provider_call_id: str | None = None
    # `gate` for the carrier's status callback, whose duration is the carrier's own.
    source: str = "api"
    duration_s: int | None = None
    # The platform's own verdict, `spam` or `good`: the call's label while its owner has given none
    # (`domain.labels`).
    disposition: str | None = None


class CallLabel(Event, frozen=True, kw_only=True, tag="call.label"):
    """The owner's label for a call (`POST /v1/calls/<call_id>/label`, the dashboard): `spam` or `good`."""

    label: str


class GatePressed(Event, frozen=True, kw_only=True, tag="gate.pressed"):
    """The caller's answer to the gate's challenge: the keys pressed, empty when none."""

    digits: str = ""


class GateForwarded(Event, frozen=True, kw_only=True, tag="gate.forwarded"):
    """How a gate forward to the number's platform went, as the edge saw it; `at` is when it finished."""

    host: str
    duration_ms: int
    failed: bool


class Turn(Event, frozen=True, kw_only=True, omit_defaults=True):
    """A turn-type event: only lengths, counts and a 12-hex hash, never words (absent fields stay absent)."""

    role: str
    turn: int | None = None
    chars: int | None = None
    words: int | None = None
    hash: str | None = None
    interrupted: bool | None = None


class TurnStarted(Turn, frozen=True, kw_only=True, tag="turn.started"):
    pass


class TurnEnded(Turn, frozen=True, kw_only=True, tag="turn.ended"):
    pass


class Interruption(Turn, frozen=True, kw_only=True, tag="interruption"):
    pass


class Transcript(Turn, frozen=True, kw_only=True, tag="transcript"):
    pass


class Tick(Event, frozen=True, kw_only=True, tag="tick", omit_defaults=True):
    """The sweep's look at an open call: silence and length can trip a rule with no event of the call."""


AnyEvent = (
    CallStarted
    | CallEnded
    | TurnStarted
    | TurnEnded
    | Interruption
    | Transcript
    | Tick
    | GatePressed
    | GateForwarded
    | CallLabel
)
TURN_TYPES = ("turn.started", "turn.ended", "interruption", "transcript")

_decoder = msgspec.json.Decoder(AnyEvent)
_encoder = msgspec.json.Encoder()


def decode_event(raw: bytes) -> AnyEvent:
    """The event in `raw`; msgspec.ValidationError or DecodeError when it is not one."""
    event: AnyEvent = _decoder.decode(raw)
    return event


def encode(record: msgspec.Struct) -> bytes:
    return _encoder.encode(record)


def event_type(event: Event) -> str:
    return str(event.__struct_config__.tag)
