"""Facts on the decisions topic (schemas/decisions.schema.json) and outcomes on the deliveries topic.

A fact is something decided once: a start's score, a refusal, a settled end, a block, an active
pattern, points charged to a caller. Every fold that reads them applies each one idempotently (by
its id), so a fact appended twice (a refold after a crash) counts once.
"""

from __future__ import annotations

from typing import Any

import msgspec


class Thresholds(msgspec.Struct, frozen=True, gc=False):
    review: float
    reject: float


class LastCall(msgspec.Struct, frozen=True, gc=False):
    score: int
    days: int


class Prior(msgspec.Struct, frozen=True, gc=False):
    """The caller's history on this account and the network (docs/rules.md, Scoring)."""

    points: int = 0
    calls: int = 0
    good: int = 0
    last: LastCall | None = None


class PublicBlock(msgspec.Struct, frozen=True, gc=False):
    reason: str
    alert_id: str
    since: str
    until: str


class Cap(msgspec.Struct, frozen=True, gc=False):
    allowance: int
    used: int
    resets_at: str


class ScoreResult(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """The answer to a start (docs/api.md); `block` is always present, `capped` and `cap` when so."""

    call_id: str
    score: float
    action: str
    thresholds: Thresholds
    reasons: tuple[str, ...]
    block: PublicBlock | None
    checks: dict[str, int]
    prior: Prior
    capped: bool = False
    cap: Cap | None = None
    duplicate: bool = False


class Fact(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", gc=False):
    id: str
    account_id: str
    number: str
    at: int


class DestinationBurst(msgspec.Struct, frozen=True, gc=False):
    """An outbound start that made a traffic-pumping run: the prefix its numbers share, and the numbers."""

    prefix: str
    numbers: list[str]


class CallDecided(Fact, frozen=True, kw_only=True, tag="call.decided"):
    """A start's score, decided once; `id` is the start event's id."""

    call_id: str
    caller: str
    caller_country: str
    caller_first_at: int | None
    geo: dict[str, Any] | None
    cost: float | None
    direction: str
    provider_call_id: str | None
    quiet: bool
    number_created: bool
    received_at: int
    answer: ScoreResult
    # The start's credential (`domain.events.Event.credential`): a path token's weighs less network-wide.
    credential: str = "key"
    # An outbound start that made a `destination_burst`: the number's detectors raise its alert.
    burst: DestinationBurst | None = None


class CallRefused(Fact, frozen=True, kw_only=True, tag="call.refused"):
    """A start refused (409, 402): a replay must refuse it again whatever came after it."""

    call_id: str
    status: int
    body: dict[str, Any]


class CallSettled(Fact, frozen=True, kw_only=True, tag="call.settled"):
    """An ended call's settled score; `id` is the end event's id."""

    call_id: str
    caller: str
    duration_s: int
    spam_score: int | None
    cost: float | None
    quiet: bool
    flags: list[str] = msgspec.field(default_factory=list)
    received_at: int = 0
    # Why it ended; `gate_fail` raises `caller.rate_exceeded` with `gate: "failed"`.
    reason: str | None = None
    # What the caller scored last time, as its start found it: `data.prior` of the alerts it raises.
    prior: LastCall | None = None
    # The weakest credential among the events that moved the call's scores (`CallState.credential`).
    credential: str = "key"
    # The call's standing label when it settled (`domain.labels`), its sequence number in the call (0: none
    # yet) and the credential it came with.
    label: str | None = None
    label_seq: int = 0
    label_credential: str = "key"
    # Which way the call went, and when it started: an inbound call that ended unanswered within seconds
    # makes its caller a one-ring number to the account (`callback_to_one_ring`), and an outbound call's
    # spend may pause the account's outbound.
    direction: str = "inbound"
    started_at: int | None = None


class CallLabelled(Fact, frozen=True, kw_only=True, tag="call.labelled"):
    """A call's standing label changed (`domain.labels`): its owner's, or its platform's `disposition` on an
    end that came after the call had ended. `id` is the event that labelled it; `seq` counts the call's
    labels, so a refold's copy, or one behind a later label, changes nothing. `spam_score` is the call's
    settled score (None while it is open) and `credential` the one its settled fact came with: what the call
    counted for before it was labelled."""

    call_id: str
    caller: str
    label: str
    by: str
    seq: int
    spam_score: int | None
    quiet: bool
    credential: str = "key"
    label_credential: str = "key"


class CostRaised(Fact, frozen=True, kw_only=True, tag="call.cost_raised"):
    """A later report of an ended call (its platform's end after its carrier's) raised its cost by `added`;
    `at` is the call's end, so the spend counts in the hour the call's own settlement did. `id` is that
    report's event id."""

    call_id: str
    added: float
    quiet: bool
    received_at: int
    direction: str = "inbound"


class NumberRemoved(Fact, frozen=True, kw_only=True, tag="number.removed"):
    """The account removed the protected number at `at` (its accounts record's time; `id` is the record's):
    it leaves the cap until a start received after it registers the number again."""


class BlockPlaced(Fact, frozen=True, kw_only=True, tag="block.placed"):
    alert_id: str
    caller: str
    reason: str
    since: int
    until: int


class PatternActive(Fact, frozen=True, kw_only=True, tag="pattern.active"):
    alert_id: str
    pattern: str
    match: str
    width: int | None
    since: int
    until: int


class PointsCharged(Fact, frozen=True, kw_only=True, tag="points.charged"):
    """Points charged to a caller by an alert that names it, or by a settled call's live flags."""

    caller: str
    points: int


class NumberTick(Fact, frozen=True, kw_only=True, tag="number.tick"):
    """The sweep's look at a number in a spike: an hour can return to normal with no call to it."""


class ForwardDone(Fact, frozen=True, kw_only=True, tag="forward.done"):
    """A gate forward to the number's platform: its host, how long it took, whether it failed; `id` is the
    `gate.forwarded` event's id."""

    call_id: str
    host: str
    duration_ms: int
    failed: bool


AnyFact = (
    CallDecided
    | CallRefused
    | CallSettled
    | CallLabelled
    | CostRaised
    | NumberRemoved
    | BlockPlaced
    | PatternActive
    | PointsCharged
    | NumberTick
    | ForwardDone
)


class Delivery(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", omit_defaults=True, gc=False):
    """A record of the deliveries topic (schemas/deliveries.schema.json), keyed by alert id."""

    alert_id: str
    account_id: str
    at: int = 0


class DeliverySkipped(Delivery, frozen=True, kw_only=True, tag="delivery.skipped"):
    reason: str


class DeliveryAttempt(Delivery, frozen=True, kw_only=True, tag="delivery.attempt"):
    """Appended before the POST. `created_at` is the alert's: every instance counts the attempt against the
    account's alerts per minute by it (absent from records that predate it)."""

    created_at: str | None = None


class DeliveryOutcome(Delivery, frozen=True, kw_only=True, tag="delivery.outcome"):
    delivered: bool
    status: int | None
    error: str | None
    duration_ms: int


class HangUpAttempt(Delivery, frozen=True, kw_only=True, tag="hangup.attempt"):
    """Appended before the carrier is asked to end a gated call, so no rebuild or restart asks twice."""

    call_sid: str


class HangUpOutcome(Delivery, frozen=True, kw_only=True, tag="hangup.outcome"):
    ended: bool
    status: int | None
    error: str | None
    duration_ms: int


class ChannelRecord(Delivery, frozen=True, kw_only=True):
    """A record about one alert's email, text or voice message to one destination (domain.channels)."""

    channel: str
    to: str


class ChannelSkipped(ChannelRecord, frozen=True, kw_only=True, tag="channel.skipped"):
    reason: str


class ChannelAttempt(ChannelRecord, frozen=True, kw_only=True, tag="channel.attempt"):
    """Appended before the send, so no rebuild or restart sends twice. `created_at` is the alert's: the
    hourly caps count sends by it, on every instance alike."""

    created_at: str


class ChannelOutcome(ChannelRecord, frozen=True, kw_only=True, tag="channel.outcome"):
    delivered: bool
    status: int | None
    error: str | None
    duration_ms: int


AnyDelivery = (
    DeliverySkipped
    | DeliveryAttempt
    | DeliveryOutcome
    | HangUpAttempt
    | HangUpOutcome
    | ChannelSkipped
    | ChannelAttempt
    | ChannelOutcome
)

_facts = msgspec.json.Decoder(AnyFact)
_deliveries = msgspec.json.Decoder(AnyDelivery)


def decode_fact(raw: bytes) -> AnyFact:
    fact: AnyFact = _facts.decode(raw)
    return fact


def decode_delivery(raw: bytes) -> AnyDelivery:
    record: AnyDelivery = _deliveries.decode(raw)
    return record
