"""The decisions topic's fold around `domain.detectors.observe`, and the
sweep that ticks numbers in a spike (an hour can return to normal with no call).

Each number's window lives in the `number_windows` table; alerts go to the alerts topic, blocks,
patterns and points back to the decisions topic as facts, where every worker's mirror applies them.
"""

from __future__ import annotations

import msgspec

from domain import detectors, keys
from domain.detectors import Echo, NumberWindow
from domain.facts import NumberTick, decode_fact
from domain.ids import derived_event_id
from processors.folds.parts import Parts
from processors.folds.shell import Pending, Record, Sweeps, each_record


def register(w: Parts) -> None:
    w.tables.table("number_windows")
    sweeps = Sweeps(w, "number_sweeps", "decisions", lambda key, due: stored_tick_after(w, key, due))

    async def detect(record: Record, pending: Pending, replay: bool) -> None:
        try:
            await observe(w, record, pending, replay, sweeps)
        finally:
            w.barrier.detector_folded(record.message.partition, record.message.offset)

    each_record(w, "decisions", detect)

    async def tick(key: str, due: int) -> None:
        """A tick for a number whose spike may have ended with the last hour; the detector decides."""
        account, number = key.split(":", 1)
        # At the hour's end in event time, however late its calls are reported: a number whose calls
        # are backdated stays in their time.
        tick = NumberTick(id=derived_event_id("tick", key, str(due)), account_id=account, number=number, at=due)
        await w.appender.append("decisions", key, tick)

    sweeps.every(w.settings.silent_sweep_s, tick)


def stored_tick_after(w: Parts, key: str, due: int) -> int:
    """`Due.tick_after` for a row of the number sweeps table, from its number's window
    (`domain.detectors.tick_after`)."""
    window = w.tables.get("number_windows", key, NumberWindow)
    return detectors.tick_after(window, due) if window is not None else due


async def observe(w: Parts, record: Record, pending: Pending, replay: bool, sweeps: Sweeps) -> None:
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
    sweeps.write(key, observed.due)
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
