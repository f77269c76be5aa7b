"""The per-call agent: folds the events topic into the calls table and answers each event."""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from callscreen.kafka import partition_for
from callscreen.plans import plan_limits
from callscreen.times import now_ms
from processors import calls
from processors.runtime import Runtime

TICK_REPEAT_MS = 5000


def register(rt: Runtime) -> None:
    settings, app = rt.settings, rt.app
    events = rt.topic("events")
    rt.table("calls")
    rt.table("call_index")
    rt.table("sweeps")
    ticked: dict[str, int] = {}

    def index_call(call: dict[str, Any], partition: int) -> None:
        entry = [call["started_at"], call["call_id"], call["number"], call["caller"], call["action"]]
        rt.index("call_index", call["account_id"], partition, entry)

    def watch(key: str, due: int | None) -> None:
        """One sweeps entry per open call that a rule may trip with no further event: its due time."""
        if rt.read("sweeps", key) != due:
            if due is None:
                rt.delete("sweeps", key)
            else:
                rt.write("sweeps", key, due)

    @app.agent(events, concurrency=1)
    async def fold_events(stream: Any) -> None:
        async for event, pending in rt.folds(stream, "events"):
            record = orjson.loads(event.value)
            replay = rt.folded("events", event)
            if replay:
                await rt.mirror_caught_up.wait()
            # With the partitions split between workers, an event must see every decision answered before
            # it was sent, whichever worker made it: same answers as one worker, at the cost of a round trip.
            shared = not replay and not rt.holds_every_partition()
            if shared and rt.level_facts is not None:
                await rt.level_facts()
            key = event.key.decode()
            state = rt.read("calls", key)
            if record["type"] == "call.started" and not replay and not shared:
                # Only a start reads blocks and patterns (its score).
                await rt.consequences_applied(f"{record['account_id']}:{record['number']}")
            target = calls.alias_target(state, record, rt.view)
            if target is not None and not replay:
                forward = f"{record['account_id']}:{target}".encode()
                await events.send(key=forward, value=event.value, headers=event.headers)
            if target is not None:
                continue
            outcome = calls.handle(
                state,
                record,
                rt.view,
                rt.policy,
                plan_limits(settings, record.get("plan", "")),
                rt.live,
                settings.max_call_turns,
                rt.detectors.long_call_min,
            )
            if replay:
                outcome.facts, outcome.alerts = [], []
            for fact in outcome.facts:
                rt.view.apply(fact)
            if outcome.state is not None:
                rt.write("calls", key, outcome.state)
                if state is None:
                    index_call(outcome.state, event.message.partition)
                watch(key, calls.sweep_due(outcome.state, rt.live, rt.detectors.long_call_min))
            if not replay and not shared:
                # Answered before the appends: a send can wait a broker round trip for its partition's
                # previous record, and a crash before they land refolds the event, which appends them again.
                await rt.reply(event, outcome.status, outcome.body)
            acks = [await rt.send("decisions", f"{f['account_id']}:{f['number']}", f) for f in outcome.facts]
            if not shared:
                for fact, ack in zip(outcome.facts, acks, strict=True):
                    rt.appended_fact(f"{fact['account_id']}:{fact['number']}", ack)
            acks += [await rt.send("alerts", a["account_id"], a) for a in outcome.alerts]
            if shared:
                # Durable before the answer, so the barrier of the client's next event covers them.
                for ack in acks:
                    await ack
                if not replay:
                    await rt.reply(event, outcome.status, outcome.body)
            pending.extend(acks)

    @app.timer(settings.silent_sweep_s, on_leader=False)
    async def sweep() -> None:
        """Appends a tick for each open call a rule may now trip without another event; the fold decides."""
        if app.consumer is None or app.rebalancing or not await rt.replay_done("events"):
            return
        now = now_ms()
        # The table iterates the partitions this worker holds; each entry is one open call's due time.
        entries = [(raw_key.decode(), orjson.loads(raw_due)) for raw_key, raw_due in rt.table("sweeps").items()]
        for gone in ticked.keys() - {key for key, _ in entries}:
            del ticked[gone]
        for key, due in entries:
            if due > now or now - ticked.get(key, 0) < TICK_REPEAT_MS:
                continue
            ticked[key] = now
            account, call_id = key.split(":", 1)
            tick = {"type": "tick", "id": uuid.uuid4().hex, "at": now, "account_id": account, "call_id": call_id}
            await rt.send("events", key, tick, partition=partition_for(key, settings.partitions))
