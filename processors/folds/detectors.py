"""The detector agent: a shell around `domain.detectors.observe` for the decisions topic, and the
sweep that ticks numbers in a spike (an hour can return to normal with no call).

Each number's window lives in the `number_windows` table; alerts go to the alerts topic, blocks,
patterns and points back to the decisions topic as facts, where every worker's mirror applies them.
"""

from __future__ import annotations

from typing import Any

import msgspec

from domain import detectors, keys
from domain.detectors import Echo, NumberWindow
from domain.facts import NumberTick, decode_fact
from domain.ids import derived_event_id
from processors.faust.feed import Feed
from processors.folds.parts import Parts
from processors.folds.shell import DueIndex
from processors.output.dead_letters import POISON


def register(w: Parts) -> None:
    for name in ("number_windows", "number_sweeps"):
        w.tables.table(name)
    due_numbers = DueIndex()

    @w.fold("decisions")
    async def detect(feed: Feed) -> None:
        async for record, pending in w.commits.folds(feed, "decisions"):
            replay = w.progress.folded("decisions", record)
            try:
                await observe(w, record, pending, replay, due_numbers)
            except POISON as error:
                await w.dead_letters.put("decisions", record, error, pending)
            w.barrier.detector_folded(record.message.partition, record.message.offset)

    @w.app.timer(w.settings.silent_sweep_s, on_leader=False)
    async def sweep_numbers() -> None:
        """A tick for each number whose spike may have ended with the last hour; the detector decides."""
        if w.app.consumer is None or w.app.rebalancing or not await w.progress.replay_done("decisions"):
            return
        # The table holds the partitions this worker holds; each row is one number's due time.
        due_numbers.built(
            frozenset(w.app.consumer.assignment()),
            lambda: ((key, due, stored_tick_after(w, key, due)) for key, due in w.tables.due_times("number_sweeps")),
        )
        for key, due in due_numbers.to_tick(w.sweep_clock()):
            account, number = key.split(":", 1)
            # At the hour's end in event time, however late its calls are reported: a number whose calls
            # are backdated stays in their time.
            tick = NumberTick(id=derived_event_id("tick", key, str(due)), account_id=account, number=number, at=due)
            await w.appender.append("decisions", key, tick)


def stored_tick_after(w: Parts, key: str, due: int) -> int:
    """`detectors.tick_after` for a row of the number sweeps table, from its number's window (a timer's read)."""
    window = w.tables.get("number_windows", key, NumberWindow)
    return detectors.tick_after(window, due) if window is not None else due


async def observe(w: Parts, record: Any, pending: list[Any], replay: bool, due_numbers: DueIndex) -> None:
    try:
        fact = decode_fact(record.value)
    except msgspec.ValidationError:
        return  # a kind the detectors do not read
    key = record.key.decode()
    window = w.tables.get("number_windows", key, NumberWindow) or NumberWindow()
    echo_of = w.tables.reader("number_windows", Echo)
    observed = detectors.observe(window, fact, w.rules.detectors, w.rules.scoring, lambda i: echo_of(keys.echo(key, i)))
    if observed.window is not window:
        w.tables.put("number_windows", key, observed.window)
    if observed.echo is not None:
        w.tables.put("number_windows", keys.echo(key, fact.id), observed.echo)
    for forgotten in observed.forgotten:
        w.tables.delete("number_windows", keys.echo(key, forgotten))
    due = detectors.sweep_due(observed.window, fact.at)
    due_numbers.set(key, due, None if due is None else detectors.tick_after(observed.window, due))
    if w.tables.get("number_sweeps", key, int) != due:
        if due is None:
            w.tables.delete("number_sweeps", key)
        else:
            w.tables.put("number_sweeps", key, due)
    w.faults.at("after_write")
    if replay:
        # Alerts and consequences of a replayed fact are already in the log.
        return
    for alert in observed.alerts:
        pending.append(await w.appender.append("alerts", alert.account_id, alert))
    for placed in observed.facts:
        w.mirror.own(placed)
        pending.append(await w.appender.append("decisions", key, placed))
    if observed.alerts or observed.facts:
        w.faults.at("after_append")
