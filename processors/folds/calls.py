"""The events topic's fold around `domain.calls.fold`, and the call sweep.

For each event: wait on the barrier, read the call's row, gather what the event reads beyond it, fold,
write what the outcome says (the row, the listing's entry, the sweep's due time), answer, append the
facts and alerts.
"""

from __future__ import annotations

from typing import Any

from domain import calls, features, keys
from domain.calls import CallState, Outcome, Stored
from domain.events import CallStarted, Tick, decode_event
from domain.ids import derived_event_id
from infra.kafka import partition_for
from processors.folds.parts import Parts
from processors.folds.shell import Pending, Record, Sweeps, each_record


def register(w: Parts) -> None:
    events = w.topic("events")
    for name in ("calls", "call_index"):
        w.tables.table(name)
    sweeps = Sweeps(w, "sweeps", "events", lambda key, due: stored_tick_after(w, key, due))

    async def fold_one(record: Record, pending: Pending, replay: bool) -> None:
        await fold_event(w, events, record, pending, replay, sweeps)

    each_record(w, "events", fold_one)

    async def tick(key: str, due: int) -> None:
        """A tick for an open call a rule may now trip without another event; the fold decides."""
        account, call_id = keys.split_call(key)
        # At its due time in event time, as a number's tick: a call reported late stays in its own time.
        # A tick at the sweep's time was ahead of every event such a call still sent, and each of them
        # replayed the live picture's last steps (docs/decisions/0016-ticks-at-their-calls-time.md).
        # One id per due time: a tick appended again before the fold moved the due time counts once.
        tick = Tick(id=derived_event_id("tick", key, str(due)), account_id=account, call_id=call_id, at=due)
        await w.appender.append("events", key, tick, partition=partition_for(key, w.settings.partitions))

    sweeps.every(w.settings.silent_sweep_s, tick)


async def fold_event(w: Parts, events: Any, record: Record, pending: Pending, replay: bool, sweeps: Sweeps) -> None:
    event = decode_event(record.value)
    if not w.mirror.caught_up.is_set():
        await w.mirror.caught_up.wait()
    # With the partitions split between workers, an event must see every fact appended before it was
    # sent, whichever worker appended it: the same answers as one worker, at the cost of a round trip.
    shared = not replay and not w.progress.holds_every_partition()
    if shared:
        await w.barrier.level()
    elif not replay and isinstance(event, CallStarted):
        await w.barrier.consequences_of(keys.number(event.account_id, event.number))
    key = record.key.decode()
    state: Stored | None = w.tables.get("calls", key, Stored)
    outcome = calls.fold(state, event, features.context(w.view, state, event, w.rules), w.rules)
    write_state(w, key, outcome, record.message.partition, sweeps)
    leave_horizon(w, record.message.partition, event.at, sweeps)
    w.faults.at("after_write")
    if outcome.forward is not None:
        if not replay:
            target = keys.call(event.account_id, outcome.forward).encode()
            await events.send(key=target, value=record.value, headers=record.headers)
        return
    if replay:
        # Its answer was given and its facts and alerts are in the log already.
        return
    if not shared:
        # Answered before the appends: a crash before they land refolds the event, which appends them again.
        await w.replies.reply(record, outcome.status, outcome.body)
    acks = await append(w, outcome)
    w.faults.at("after_append")
    if shared:
        # Durable before the answer, so the barrier of the client's next event covers them.
        for ack in acks:
            await ack
        await w.replies.reply(record, outcome.status, outcome.body)
    pending.extend(acks)


def write_state(w: Parts, key: str, outcome: Outcome, partition: int, sweeps: Sweeps) -> None:
    if outcome.state is not None:
        w.tables.put("calls", key, outcome.state)
    if outcome.listed is not None:
        w.tables.add_to_index("call_index", "calls", keys.split_call(key)[0], partition, outcome.listed)
    sweeps.write(key, outcome.due)


def stored_tick_after(w: Parts, key: str, due: int) -> int:
    """`Due.tick_after` for a row of the sweeps table, from its call's row (`domain.calls.tick_after`)."""
    call = w.tables.get("calls", key, Stored)
    return calls.tick_after(call, due) if isinstance(call, CallState) else due


def leave_horizon(w: Parts, partition: int, at: int, sweeps: Sweeps) -> None:
    """Calls past the hot-table horizon at this event's time leave the tables (`domain.horizon`)."""
    eviction = w.tables.evict("call_index", "calls", partition, at, w.rules.limits.hot_days)
    if eviction is None:
        return
    for call_id in eviction.items:
        key = keys.call(eviction.account, call_id)
        w.tables.delete("calls", key)
        sweeps.forget(key)


async def append(w: Parts, outcome: Outcome) -> list[Any]:
    acks = []
    for fact in outcome.facts:
        number_key = keys.number(fact.account_id, fact.number)
        w.mirror.own(fact)
        ack = await w.appender.append("decisions", number_key, fact)
        w.barrier.appended(number_key, ack)
        acks.append(ack)
    for alert in outcome.alerts:
        acks.append(await w.appender.append("alerts", alert.account_id, alert))
    return acks
