"""A call's record and its lifecycle (docs/api.md, A call's life) as one pure fold.

`fold(state, event, context, rules)` takes the call's stored state, one event of the call, what
the event may read beyond its call (`StartContext`, gathered by `domain.features`) and the rules,
and returns the new state, the facts and alerts to append, and the answer. Nothing here reads a
store, a setting or a clock; time is the event's.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import msgspec

from domain import live
from domain.alerts import Alert, make_alert, with_prior
from domain.due import Due
from domain.events import (
    KEY_CREDENTIAL,
    AnyEvent,
    CallEnded,
    CallLabel,
    CallStarted,
    GateForwarded,
    GatePressed,
    Tick,
    Turn,
)
from domain.facts import (
    CallDecided,
    CallLabelled,
    CallRefused,
    CallSettled,
    Cap,
    CostRaised,
    DestinationBurst,
    Fact,
    ForwardDone,
    PointsCharged,
    PublicBlock,
    ScoreResult,
)
from domain.gate import GATE_ENDED, GATE_FAIL, GATE_PASS, GATE_REJECTED, GATE_TIMEOUT, SOURCE
from domain.ids import derived_event_id
from domain.index import CallEntry
from domain.labels import OWNER, PLATFORM, disposition_taken
from domain.outbound import Outbound
from domain.policy import scoring_for
from domain.rules import DAY_MS, MIN_MS, SECOND_MS, Rules, ScoringRules
from domain.scoring import (
    CallerView,
    Ending,
    Signals,
    destination_burst,
    destination_not_allowed,
    destination_numbers,
    one_rings,
    prior_of,
    score_start,
    settle_spam_score,
    thresholds,
    transfer_not_allowed,
)
from domain.times import day_start_ms, format_ms

NOT_ANSWERED = frozenset({"busy", "no-answer", "failed", "canceled"})


class EndReport(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """One report of the call's end that was folded: its event, a digest of what it said, and how much it
    raised the cost. The same report again (a retry) changes nothing; another one merges in."""

    event_id: str
    digest: str
    added: float = 0.0


# The ends a call keeps: a platform's, its carrier's, and room for a few reports more.
END_REPORTS_KEEP = 8


class Raised(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """An alert the call raised, with the event that raised it: a refold of that event raises it again."""

    event_id: str
    alert: Alert


class CallState(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="call", omit_defaults=True, gc=False):
    account_id: str
    call_id: str
    provider_call_id: str | None
    to: str
    from_: str = msgspec.field(name="from")
    number: str
    caller: str
    direction: str
    plan: str
    started_at: int
    ended_at: int | None = None
    reason: str | None = None
    source: str
    cost: float | None
    cost_breakdown: dict[str, float] | None
    attrs: dict[str, Any]
    quiet: bool
    state: str = "open"
    capped: bool
    spam_score: int | None
    duration_s: int | None = None
    decision: CallDecided
    end_id: str | None = None
    end_reports: tuple[EndReport, ...] = ()
    live: live.LiveState = msgspec.field(default_factory=live.LiveState)
    long_running_raised: bool = False
    raised: tuple[Raised, ...] = ()
    # The gate's challenge digit for a call the carrier reported, and whether the caller pressed it.
    gate_digit: str | None = None
    gate_passed: bool = False
    # Which source's end closed the record (`api`, or `gate` for the carrier's status callback).
    ended_by: str | None = None
    # A gated call whose first alert-level live flag ends it through the carrier (`hang_up_suspicious`),
    # and the carrier account of its signed form; without one no hang-up is asked (a state from before
    # hang-ups needed a signature, too).
    hang_up: bool = False
    carrier_account_sid: str | None = None
    # How far behind its own clock the platform reported the call's latest start or turn (the edge's
    # receipt time minus the event's `at`): a sweep waits as long before it ticks the call (`tick_after`).
    reported_late_ms: int = 0
    # The weakest credential among the events that moved its scores while it was open: `key` unless a path
    # token posted its start or a later event of it (its settled fact then weighs less network-wide).
    credential: str = KEY_CREDENTIAL
    # The call's standing label (`domain.labels`): `spam` or `good`, when it was given (the labelling
    # event's time), by whom (`owner` or `platform`), the event that gave it, how many labels the call has
    # had, and the credential the label came with.
    label: str | None = None
    labelled_at: int | None = None
    label_by: str | None = None
    label_id: str | None = None
    label_seq: int = 0
    label_credential: str = KEY_CREDENTIAL

    @property
    def answer(self) -> ScoreResult:
        return self.decision.answer


class Alias(msgspec.Struct, frozen=True, tag_field="kind", tag="alias", gc=False):
    """A call id that names another record (the same call reported by a platform and its carrier)."""

    alias_of: str


Stored = CallState | Alias


class StartContext(msgspec.Struct, frozen=True, gc=False):
    """What an event may read beyond its own call's state, gathered before the fold."""

    alias: str | None = None
    decided: CallDecided | None = None
    refused: CallRefused | None = None
    numbers: int = 0
    number_known: bool = False
    scored_today: int = 0
    caller_calls: int = 0
    caller: CallerView = CallerView()
    patterns: frozenset[str] = frozenset()
    block: PublicBlock | None = None
    # An outbound start's: the countries of the account's protected numbers (its default outbound countries),
    # its outbound calls in the burst window (time, dialled number), and when the dialled number's one-ring
    # calls to the account ended.
    number_countries: frozenset[str] = frozenset()
    outbound_calls: tuple[tuple[int, str], ...] = ()
    one_ring_ends: tuple[int, ...] = ()


class Outcome(msgspec.Struct, frozen=True, gc=False):
    """What one event does: the answer, and what the shell must write and append."""

    status: int
    body: Any
    state: Stored | None = None
    facts: list[Fact] = []
    alerts: list[Alert] = []
    # The call this event belongs to: the shell appends it again under that call's key.
    forward: str | None = None
    # The calls listing's entry to add (`listing_entry`), and when the sweep must look at the call again.
    listed: CallEntry | None = None
    due: Due | None = None


def fold(state: Stored | None, event: AnyEvent, context: StartContext, rules: Rules) -> Outcome:
    """What `event` does to the call whose row is `state`: everything the shell writes, answers and appends."""
    outcome = decide(state, event, context, rules)
    after = outcome.state if outcome.state is not None else state
    listed = listing_entry(state, event, outcome)
    due = None
    if isinstance(after, CallState) and (at := sweep_due(after, rules)) is not None:
        due = Due(at, tick_after(after, at))
    if due is None and listed is None:
        return outcome
    return msgspec.structs.replace(outcome, listed=listed, due=due)


def decide(state: Stored | None, event: AnyEvent, context: StartContext, rules: Rules) -> Outcome:
    if isinstance(state, Alias):
        return Outcome(200, None, forward=state.alias_of)
    if state is None and context.alias is not None and context.alias != event.call_id:
        return Outcome(200, None, state=Alias(context.alias), forward=context.alias)
    if isinstance(state, CallState):
        state = weakest_credential(state, event.credential)
    if isinstance(event, CallStarted):
        return start(state, event, context, rules)
    if state is None:
        # A label is asked for as a read is: a call this account does not have is not found.
        return Outcome(404, {"error": "not_found" if isinstance(event, CallLabel) else "unknown_call"})
    if isinstance(event, CallLabel):
        return labelled(state, event)
    if isinstance(event, GateForwarded):
        return forwarded(state, event)
    if isinstance(event, CallEnded):
        return end(state, event, rules)
    if isinstance(event, GatePressed):
        return pressed(state, event, rules)
    if isinstance(event, Tick | Turn):
        return turn(state, event, rules)
    return Outcome(400, {"error": "invalid_type"})


def weakest_credential(call: CallState, credential: str) -> CallState:
    """The open call, marked as a path token's when `credential` is one: an event it posts may move the
    call's settled score (its end, a turn's flag, the carrier's merged attrs)."""
    if credential == KEY_CREDENTIAL or call.credential != KEY_CREDENTIAL or call.state != "open":
        return call
    return msgspec.structs.replace(call, credential=credential)


def listing_entry(before: Stored | None, event: AnyEvent, outcome: Outcome) -> CallEntry | None:
    """The entry the calls listing must hold after this fold: a new call's, and on every start again,
    since a start folded again after a kill finds its call's row while the index may have come back
    from its changelog without the entry (`domain.index.additions` writes nothing when it is in)."""
    if before is not None and not isinstance(event, CallStarted):
        return None
    call = outcome.state if outcome.state is not None else before
    if not isinstance(call, CallState):
        return None
    return CallEntry(call.started_at, call.call_id, call.number, call.caller, call.answer.action, call.source)


def start(state: CallState | None, event: CallStarted, context: StartContext, rules: Rules) -> Outcome:
    if state is not None:
        return second_start(state, event)
    if context.decided is not None:
        # Decided before (a refold after a crash): rebuild the record from the fact, never re-decide.
        decided = context.decided
        return gated_start(event, new_call(event, decided), [decided], rules)
    if context.refused is not None:
        # Refused before: the same answer and, again, its fact.
        return Outcome(context.refused.status, context.refused.body, facts=[context.refused])
    plan = rules.plans.plan(event.plan)
    scoring = scoring_for(rules.scoring, event.policy)
    if not context.number_known and not event.register:
        return refuse(event, 409, {"error": "not_protected"})
    if not context.number_known and context.numbers >= plan.numbers:
        return refuse(event, 402, {"error": "number_limit", "cap": plan.numbers})
    # The allowance counts by the day of receipt, so its reset is that day's end (domain.features counts).
    day = day_start_ms(event.received_at or event.at)
    if not event.quiet and context.scored_today >= plan.daily_starts:
        answer = ScoreResult(
            call_id=event.call_id,
            score=0.0,
            action="allow",
            thresholds=thresholds(scoring),
            reasons=("capped",),
            block=None,
            checks={},
            prior=prior_of(context.caller.history, event.at),
            capped=True,
            cap=Cap(allowance=plan.daily_starts, used=context.scored_today, resets_at=format_ms(day + DAY_MS)),
        )
    else:
        answer = score_start(event.call_id, signals(event, context, scoring), scoring)
    geo = event.attrs.get("geo")
    burst = None
    if event.direction == "outbound":
        prefix, numbers = destination_numbers(context.outbound_calls, event.caller, event.at, scoring)
        if destination_burst(len(numbers), scoring):
            burst = DestinationBurst(prefix=prefix, numbers=numbers)
    decided = CallDecided(
        id=event.id,
        account_id=event.account_id,
        number=event.number,
        at=event.at,
        call_id=event.call_id,
        caller=event.caller,
        caller_country=event.caller_info.country,
        caller_first_at=context.caller.first_seen,
        geo=geo if isinstance(geo, dict) and geo else None,
        cost=event.cost,
        direction=event.direction,
        provider_call_id=event.provider_call_id,
        quiet=event.quiet,
        number_created=not context.number_known,
        received_at=event.received_at or event.at,
        answer=answer,
        credential=event.credential,
        burst=burst,
    )
    return gated_start(event, new_call(event, decided), [decided], rules)


def gated_start(event: CallStarted, call: CallState, facts: list[Fact], rules: Rules) -> Outcome:
    """A start's outcome; a call the gate rejects ends there, with reason `rejected`."""
    if event.gate_digit is None:
        return Outcome(200, call.answer, state=call, facts=facts)
    if call.answer.action == "reject":
        call = close(call, derived_event_id(GATE_REJECTED, event.id), event.at, GATE_REJECTED, SOURCE, rules)
        facts = [*facts, *settled_facts(call, rules, event.received_at)]
    return Outcome(200, gate_body(call, call.answer), state=call, facts=facts)


def gate_body(call: CallState, answer: ScoreResult) -> dict[str, Any]:
    """What the gate's edge needs: the score's answer, the challenge digit, and whether the call is over."""
    return {"answer": answer, "digit": call.gate_digit, "state": call.state}


def second_start(state: CallState, event: CallStarted) -> Outcome:
    """The same start again (a retry, or a refold), or the same call from its other source."""
    gated = event.gate_digit is not None
    if event.id == state.decision.id:
        return Outcome(200, gate_body(state, state.answer) if gated else state.answer, facts=[state.decision])
    answer = msgspec.structs.replace(state.answer, call_id=event.call_id, duplicate=True)
    if event.call_id == state.call_id:
        return Outcome(200, gate_body(state, answer) if gated else answer)
    # The platform and its carrier both reported this call: one record, the later source merged in.
    merged = merge_report(state, event.cost, event.cost_breakdown, event.attrs, fill_only=True)
    if gated and merged.gate_digit is None:
        # Only the CallSid the carrier signed is ever ended: the platform's report names the record's.
        signed = event.hang_up and merged.provider_call_id == event.call_id
        merged = msgspec.structs.replace(
            merged,
            gate_digit=event.gate_digit,
            hang_up=signed,
            carrier_account_sid=event.carrier_account_sid if signed else None,
        )
    return Outcome(200, gate_body(merged, answer) if gated else answer, state=merged)


def refuse(event: CallStarted, status: int, body: dict[str, Any]) -> Outcome:
    """A refused start is a fact too: a replay must refuse it again whatever came after it."""
    fact = CallRefused(
        id=event.id,
        account_id=event.account_id,
        number=event.number,
        at=event.at,
        call_id=event.call_id,
        status=status,
        body=body,
    )
    return Outcome(status, body, facts=[fact])


def signals(event: CallStarted, context: StartContext, rules: ScoringRules) -> Signals:
    attrs = event.attrs
    caller, number = event.caller_info, event.number_info
    digits = rules.neighbor_digits
    neighbor = (
        event.caller != event.number
        and caller.country == number.country
        and caller.national[:digits] == number.national[:digits]
    )
    calls = context.caller_calls + 1
    found = Signals(
        at=event.at,
        trusted=event.trusted,
        attestation=attrs.get("attestation"),
        caller_valid=caller.valid,
        self_call=event.caller == event.number,
        neighbor=neighbor,
        premium=caller.premium,
        forwarded=bool(attrs.get("forwarded_from")),
        caller_calls_10m=calls,
        patterns=context.patterns,
        block=context.block,
        caller=context.caller,
        checks={
            "caller_calls_10m": calls,
            "network_calls": context.caller.history.calls,
            "network_accounts": context.caller.reached,
            # Other accounts whose own history of the caller agrees: bad last call, good calls.
            "network_bad_accounts": context.caller.bad_accounts,
            "network_good_accounts": context.caller.good_accounts,
            # Of those, the accounts whose agreeing history came only from path tokens: they count for
            # `scoring_network_token_weight` of an account each.
            "network_bad_token_accounts": context.caller.bad_token_accounts,
            "network_good_token_accounts": context.caller.good_token_accounts,
        },
    )
    if event.direction != "outbound":
        return found
    return outbound_signals(found, event, context, rules)


def outbound_signals(found: Signals, event: CallStarted, context: StartContext, rules: ScoringRules) -> Signals:
    """An outbound start's signals: where it goes, as the account's settings stamped on it allow."""
    settings = event.outbound or Outbound()
    countries = context.number_countries if settings.countries is None else settings.countries
    _, numbers = destination_numbers(context.outbound_calls, event.caller, event.at, rules)
    rings = one_rings(context.one_ring_ends, event.at, rules)
    return msgspec.structs.replace(
        found,
        outbound=True,
        destination_not_allowed=destination_not_allowed(event.caller_info.country, countries),
        transfer_not_allowed=transfer_not_allowed(event.caller, event.attrs.get("transfer") is True, settings.transfer),
        destination_numbers_10m=len(numbers),
        one_rings_24h=rings,
        outbound_paused=settings.paused is not None,
        checks={**found.checks, "destination_numbers_10m": len(numbers), "one_rings_24h": rings},
    )


def new_call(event: CallStarted, decided: CallDecided) -> CallState:
    answer = decided.answer
    return CallState(
        account_id=event.account_id,
        call_id=event.call_id,
        provider_call_id=event.provider_call_id,
        to=event.to,
        from_=event.from_,
        number=event.number,
        caller=event.caller,
        direction=event.direction,
        plan=event.plan,
        started_at=event.at,
        source=event.source,
        cost=event.cost,
        cost_breakdown=event.cost_breakdown,
        attrs=event.attrs,
        quiet=event.quiet,
        capped=answer.capped,
        spam_score=None if answer.capped else round(answer.score * 100),
        decision=decided,
        gate_digit=event.gate_digit,
        hang_up=event.hang_up,
        carrier_account_sid=event.carrier_account_sid,
        reported_late_ms=reported_late(event),
        credential=event.credential,
    )


def reported_late(event: CallStarted | Turn) -> int:
    """How long after its own `at` the edge received `event` (0 when it was not stamped, or came early)."""
    return 0 if event.received_at is None else max(0, event.received_at - event.at)


def merge_report(
    call: CallState,
    cost: float | None,
    breakdown: dict[str, float] | None,
    attrs: dict[str, Any],
    fill_only: bool = False,
) -> CallState:
    """Another report of the call: the larger cost is kept; a platform breakdown replaces, a carrier's
    price only fills gaps; attrs merge in (a second source's start only fills gaps)."""
    new_cost = call.cost
    if cost is not None and (new_cost is None or cost > new_cost):
        new_cost = cost
    new_breakdown = call.cost_breakdown
    if breakdown:
        if set(breakdown) - {"carrier"}:
            new_breakdown = dict(breakdown)
        else:
            new_breakdown = {**breakdown, **(call.cost_breakdown or {})}
    merged_attrs = {**attrs, **call.attrs} if fill_only else {**call.attrs, **attrs}
    return msgspec.structs.replace(call, cost=new_cost, cost_breakdown=new_breakdown, attrs=merged_attrs)


def end(state: CallState, event: CallEnded, rules: Rules) -> Outcome:
    report = end_digest(event)
    if state.state == "ended":
        body = {"call_id": state.call_id, "duration_s": state.duration_s, "spam_score": state.spam_score}
        if state.end_id == event.id:
            # The same end folded again (a crash before its fact landed): the same answer and fact.
            return Outcome(200, body, facts=settled_facts(state, rules))
        known = next((r for r in state.end_reports if r.digest == report), None)
        if known is not None:
            # The same report again: a retry changes nothing; this very event folded again after a crash
            # appends its facts again.
            again = cost_raised(state, known, event.received_at) if known.event_id == event.id else []
            if state.label_id == event.id:
                again = [*again, label_fact(state)]
            return Outcome(200, {**body, "duplicate": True}, facts=again)
        # Another reporter's end (the platform's after its carrier's, or the carrier's status callback):
        # its cost and attrs merge in; the record stays closed as the first end settled it.
        merged = merge_report(state, event.cost, event.cost_breakdown, event.attrs)
        added = round((merged.cost or 0.0) - (state.cost or 0.0), 6)
        entry = EndReport(event.id, report, added)
        merged = msgspec.structs.replace(merged, end_reports=(*state.end_reports, entry)[-END_REPORTS_KEEP:])
        facts = cost_raised(merged, entry, event.received_at)
        relabelled = with_disposition(merged, event)
        if relabelled is not merged:
            # The call settled before this report's verdict: the label is a fact of its own.
            merged, facts = relabelled, [*facts, label_fact(relabelled)]
        return Outcome(200, {**body, "duplicate": True}, state=merged, facts=facts)
    call = with_disposition(merge_report(state, event.cost, event.cost_breakdown, event.attrs), event)
    call = close(call, event.id, event.at, event.reason, event.source, rules, event.duration_s)
    call = msgspec.structs.replace(call, end_reports=(EndReport(event.id, report),))
    body = {"call_id": call.call_id, "duration_s": call.duration_s, "spam_score": call.spam_score}
    return Outcome(200, body, state=call, facts=settled_facts(call, rules, event.received_at))


def end_digest(event: CallEnded) -> str:
    """What an end report says, apart from its id and times: a retry of the same body says the same."""
    said: tuple[Any, ...] = (
        event.call_id,
        event.provider_call_id,
        event.source,
        event.reason,
        event.cost,
        event.cost_breakdown,
        event.attrs,
        event.duration_s,
    )
    if event.disposition is not None:
        # Only when given, so an end's digest from before dispositions stays what it was.
        said = (*said, event.disposition)
    return hashlib.sha256(msgspec.json.encode(said, order="sorted")).hexdigest()[:16]


def cost_raised(call: CallState, report: EndReport, received_at: int | None) -> list[Fact]:
    """The spend a later report added, for the number's spend detector."""
    if report.added <= 0:
        return []
    assert call.ended_at is not None
    return [
        CostRaised(
            id=report.event_id,
            account_id=call.account_id,
            number=call.number,
            at=call.ended_at,
            call_id=call.call_id,
            added=report.added,
            quiet=call.quiet,
            received_at=received_at or call.ended_at,
            direction=call.direction,
        )
    ]


def close(
    call: CallState,
    end_id: str,
    at: int,
    reason: str,
    ended_by: str,
    rules: Rules,
    duration_s: int | None = None,
) -> CallState:
    """The record closed: its end, and its spam score settled from its length (the carrier's, when it
    gave one) and its turns."""
    duration = duration_s if duration_s is not None else max(0, round((at - call.started_at) / SECOND_MS))
    ending = Ending(
        duration_s=duration,
        answered=reason not in NOT_ANSWERED,
        machine_inbound=call.direction == "inbound" and call.attrs.get("answered_by") == "machine_start",
    )
    return msgspec.structs.replace(
        call,
        ended_at=at,
        end_id=end_id,
        reason=reason,
        state="ended",
        ended_by=ended_by,
        duration_s=duration,
        spam_score=spam_score(call, rules, ending),
    )


def pressed(state: CallState, event: GatePressed, rules: Rules) -> Outcome:
    """The caller's answer to the gate's challenge: the right digit passes; a wrong one ends the call
    `gate_fail` (its settled fact raises `caller.rate_exceeded` with `gate: "failed"`); none, `gate_timeout`."""
    if state.gate_digit is None:
        return Outcome(404, {"error": "unknown_call"})
    if state.state == "ended":
        if state.end_id == event.id:
            return Outcome(200, {"result": state.reason}, facts=settled_facts(state, rules))
        return Outcome(200, {"result": GATE_ENDED})
    if state.gate_passed or event.digits == state.gate_digit:
        call = msgspec.structs.replace(state, gate_passed=True)
        return Outcome(200, {"result": GATE_PASS, "answer": call.answer}, state=call)
    reason = GATE_TIMEOUT if not event.digits else GATE_FAIL
    call = close(state, event.id, event.at, reason, SOURCE, rules, duration_s=0)
    return Outcome(200, {"result": reason}, state=call, facts=settled_facts(call, rules, event.received_at))


def forwarded(state: CallState, event: GateForwarded) -> Outcome:
    """A gate forward's outcome, as a fact for the number's detectors (`platform.degraded`)."""
    done = ForwardDone(
        id=event.id,
        account_id=state.account_id,
        number=state.number,
        at=event.at,
        call_id=state.call_id,
        host=event.host,
        duration_ms=event.duration_ms,
        failed=event.failed,
    )
    return Outcome(200, None, facts=[done])


def settled_facts(call: CallState, rules: Rules, received_at: int | None = None) -> list[Fact]:
    """An ended call's settled score, identified by its end event, and the points its flags charge."""
    assert call.end_id is not None and call.ended_at is not None and call.duration_s is not None
    settled = CallSettled(
        id=call.end_id,
        account_id=call.account_id,
        number=call.number,
        at=call.ended_at,
        call_id=call.call_id,
        caller=call.caller,
        duration_s=call.duration_s,
        spam_score=call.spam_score,
        cost=call.cost,
        quiet=call.quiet,
        flags=list(call.live.flags),
        received_at=received_at or call.ended_at,
        reason=call.reason,
        prior=call.answer.prior.last,
        credential=call.credential,
        label=call.label,
        label_seq=call.label_seq,
        label_credential=call.label_credential,
        direction=call.direction,
        started_at=call.started_at,
    )
    facts: list[Fact] = [settled]
    if call.live.flags and not call.quiet:
        points = rules.scoring.flag_points * len(call.live.flags)
        facts.append(
            PointsCharged(
                id=f"{call.end_id}:flags",
                account_id=call.account_id,
                number=call.number,
                at=call.ended_at,
                caller=call.caller,
                points=points,
            )
        )
    return facts


def labelled(state: CallState, event: CallLabel) -> Outcome:
    """The owner's label: it stands from now on, over the platform's and over the owner's earlier one. The
    answer is the call record; a label the call already has from its owner changes nothing."""
    if state.label_id == event.id:
        # Folded again after a crash: the same answer, and its fact again.
        return Outcome(200, public_call(state), facts=[label_fact(state)])
    if state.label == event.label and state.label_by == OWNER:
        return Outcome(200, public_call(state))
    call = relabel(state, event.label, OWNER, event)
    return Outcome(200, public_call(call), state=call, facts=[label_fact(call)])


def relabel(call: CallState, label: str, by: str, event: CallLabel | CallEnded) -> CallState:
    return msgspec.structs.replace(
        call,
        label=label,
        labelled_at=event.at,
        label_by=by,
        label_id=event.id,
        label_seq=call.label_seq + 1,
        label_credential=event.credential,
    )


def with_disposition(call: CallState, event: CallEnded) -> CallState:
    """The platform's verdict on an end as the call's label, unless its owner gave one (`domain.labels`)."""
    if event.disposition is None or not disposition_taken(call.label_by, call.label, event.disposition):
        return call
    return relabel(call, event.disposition, PLATFORM, event)


def label_fact(call: CallState) -> CallLabelled:
    """The call's standing label, for its caller's history in the feature view."""
    assert call.label is not None and call.label_by is not None and call.label_id is not None
    return CallLabelled(
        id=call.label_id,
        account_id=call.account_id,
        number=call.number,
        at=call.labelled_at if call.labelled_at is not None else call.started_at,
        call_id=call.call_id,
        caller=call.caller,
        label=call.label,
        by=call.label_by,
        seq=call.label_seq,
        spam_score=call.spam_score if call.state == "ended" else None,
        quiet=call.quiet,
        credential=call.credential,
        label_credential=call.label_credential,
    )


def turn(state: CallState, event: Turn | Tick, rules: Rules) -> Outcome:
    """A turn-type event or a sweep tick: the live picture, and the alerts it raises."""
    is_tick = isinstance(event, Tick)
    if not is_tick and event.plan != "guard":
        return Outcome(200, {**live_body(state), "ignored": True, "why": "live_monitor_is_guard"})
    if live.already_folded(state.live, event.id):
        again = [r.alert for r in state.raised if r.event_id == event.id]
        return Outcome(200, live_body(state), alerts=again, facts=charges_of(again, state, rules))
    if not isinstance(event, Tick) and live.repeated(state.live, event):
        # The same turn again under another id (a client's retry after a 503): counted once.
        return Outcome(200, {**live_body(state), "duplicate": True})
    if state.state == "ended":
        # The record is closed: a late turn changes neither the settled score nor raises anything.
        return Outcome(200, {**live_body(state), "ignored": True, "why": "call_ended"} if not is_tick else None)
    if not is_tick and state.live.written >= rules.limits.max_call_turns:
        return Outcome(200, {**live_body(state), "ignored": True, "why": "call_turn_cap"})
    start_score = 0.0 if state.capped else state.answer.score
    step = live.fold(state.live, event, state.started_at, start_score, rules.live)
    late = reported_late(event) if isinstance(event, Turn) else state.reported_late_ms
    call = msgspec.structs.replace(state, live=step.state, reported_late_ms=late)
    call = msgspec.structs.replace(call, spam_score=spam_score(call, rules))
    raised_at = event.at if is_tick else (event.received_at or event.at)
    alerts: list[Alert] = []
    if step.tripped_alert and not call.quiet:
        alerts.append(suspicious_alert(call, raised_at))
    long_running = long_running_alert(call, event.at, raised_at, rules)
    if long_running is not None:
        call = msgspec.structs.replace(call, long_running_raised=True)
        if not call.quiet:
            alerts.append(long_running)
    if alerts:
        call = msgspec.structs.replace(call, raised=(*call.raised, *(Raised(event.id, a) for a in alerts)))
    return Outcome(
        200, live_body(call) if not is_tick else None, state=call, alerts=alerts, facts=charges_of(alerts, call, rules)
    )


def charges_of(alerts: list[Alert], call: CallState, rules: Rules) -> list[Fact]:
    points = rules.scoring.alert_points
    return [
        PointsCharged(
            id=f"{a.id}:points:{call.caller}",
            account_id=call.account_id,
            number=call.number,
            at=call.started_at,
            caller=call.caller,
            points=int(points[a.severity]),
        )
        for a in alerts
    ]


def spam_score(call: CallState, rules: Rules, ending: Ending | None = None) -> int | None:
    picture = call.live
    return settle_spam_score(
        start_score=None if call.capped else call.answer.score,
        live_score=picture.score,
        flags=picture.flags,
        two_sided=min(picture.user_turns, picture.agent_turns) >= rules.scoring.two_sided_turns,
        ending=ending,
        rules=rules.scoring,
    )


def sweep_due(call: CallState, rules: Rules) -> int | None:
    """When a sweep must look at this call again: silence or length can raise with no further event."""
    if call.state != "open":
        return None
    due = []
    if not call.long_running_raised:
        due.append(call.started_at + rules.detectors.long_call_min * MIN_MS)
    picture = call.live
    silent = call.plan == "guard" and "silent_listener" not in picture.flags
    if silent and picture.current.first_agent_at is not None and picture.current.first_user_at is None:
        # Rounded up: a tick at this time must find the call silent for `silent_s`, or it would trip nothing.
        due.append(math.ceil(call.started_at + rules.live.silent_s * SECOND_MS))
    return min(due) if due else None


def tick_after(call: CallState, due: int) -> int:
    """When, by the edge's clock, a sweep may tick `call` for its rule due at `due` (event time).

    As late as the platform reports the call: events it sent before `due` may still be on their way by
    then. A call reported a minute behind its own clock and ticked when the clock passed `due` tripped
    rules (a silence, its length) on events older than its end, which had not yet arrived.
    """
    return due + call.reported_late_ms


def long_running_alert(call: CallState, at: int, raised_at: int, rules: Rules) -> Alert | None:
    """`call.long_running` once per call, when an event or a tick finds it open past the ceiling."""
    ceiling = rules.detectors.long_call_min
    if call.state != "open" or call.long_running_raised or at - call.started_at < ceiling * MIN_MS:
        return None
    data: dict[str, Any] = {
        "number": call.number,
        "caller": call.caller,
        "call_id": call.call_id,
        "started_at": format_ms(call.started_at),
        "minutes": (at - call.started_at) // MIN_MS,
        "ceiling_min": ceiling,
    }
    if call.direction == "outbound":
        data["direction"] = "outbound"
    with_prior(data, call.answer.prior.last)
    return make_alert(call.account_id, "call.long_running", call.call_id, call.started_at, raised_at, data)


def suspicious_alert(call: CallState, raised_at: int) -> Alert:
    """`call.suspicious`; on a gated call with `hang_up_suspicious` whose form the carrier signed, the
    carrier's call to end with it and the carrier account to ask."""
    picture = call.live
    flags = picture.flags
    first = picture.first_alert_at if picture.first_alert_at is not None else call.started_at
    data: dict[str, Any] = {
        "number": call.number,
        "caller": call.caller,
        "call_id": call.call_id,
        "flags": [f for f in flags if f in live.ALERT_LEVEL] + [f for f in flags if f not in live.ALERT_LEVEL],
        "score": picture.score,
        "seconds": max(0, (first - call.started_at) // SECOND_MS),
    }
    if call.direction == "outbound":
        data["direction"] = "outbound"
    with_prior(data, call.answer.prior.last)
    alert = make_alert(call.account_id, "call.suspicious", call.call_id, call.started_at, raised_at, data)
    if call.hang_up and call.provider_call_id and call.carrier_account_sid:
        alert = msgspec.structs.replace(
            alert,
            data={**data, "hung_up": True},
            hang_up=call.provider_call_id,
            carrier_account_sid=call.carrier_account_sid,
        )
    return alert


def call_reasons(call: CallState) -> list[str]:
    """The start's reasons, then each live flag as `live_<flag>`."""
    return [*call.answer.reasons, *(f"live_{flag}" for flag in call.live.flags)]


def public_call(call: CallState) -> dict[str, Any]:
    """The call record of docs/api.md with its live picture and its label (schemas/openapi.json)."""
    picture = call.live
    return {
        "call_id": call.call_id,
        "provider_call_id": call.provider_call_id,
        "to": call.to,
        "from": call.from_,
        "direction": call.direction,
        "at": format_ms(call.started_at),
        "ended_at": format_ms(call.ended_at) if call.ended_at is not None else None,
        "duration_s": call.duration_s,
        "reason": call.reason,
        "source": call.source,
        "cost": call.cost,
        "cost_breakdown": call.cost_breakdown,
        "attrs": call.attrs,
        "score": call.answer.score,
        "action": call.answer.action,
        "spam_score": call.spam_score,
        "reasons": call_reasons(call),
        "state": call.state,
        "flags": picture.flags,
        "user_turns": picture.user_turns,
        "agent_turns": picture.agent_turns,
        "interruptions": picture.interruptions,
        "label": call.label,
        "labelled_at": format_ms(call.labelled_at) if call.labelled_at is not None else None,
    }


def live_body(call: CallState) -> dict[str, Any]:
    picture = call.live
    return {
        "flags": picture.flags,
        "score": picture.score,
        "spam_score": call.spam_score,
        "user_turns": picture.user_turns,
        "agent_turns": picture.agent_turns,
        "interruptions": picture.interruptions,
    }
