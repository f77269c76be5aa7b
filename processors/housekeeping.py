"""What keeps a worker running beside its agents: the facts mirror, changelog flushes, heartbeats on
the status topic (readiness, rebuild progress, lag), and the control topic that starts a rebuild."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
import uuid
from typing import Any, cast

import msgspec

from infra.control import SOURCE_TOPICS, latest
from infra.follow import TopicFollower
from infra.metrics import record_lag
from processors.folds.parts import Parts

# Within the rebalance timeout (processors/app.py), so the group does not give up on this worker.
HAND_OVER_S = 4.0
# The longest a heartbeat waits for its lag figures. The broker's first answer about the topics a worker
# holds took 1.3 s after start, and the heartbeat, a readiness report, was late behind a metric.
OBSERVE_WAIT_S = 0.5


def register(w: Parts) -> None:
    app, settings = w.app, w.settings
    worker_id = f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"

    def on_control(record: dict[str, Any]) -> None:
        if latest([record]).number > w.generation.number:
            # A rebuild started a new generation: stop cleanly; the supervisor starts us in it.
            os.kill(os.getpid(), signal.SIGTERM)

    control = TopicFollower(settings, settings.topic("control"), on_control)

    @app.task
    async def follow_facts() -> None:
        await w.mirror.run()

    @app.task
    async def follow_control() -> None:
        await control.start()

    @app.task
    async def flush_changelogs() -> None:
        """Every `changelog_flush_ms` after the last flush ended (a flush under load can take longer)."""
        while not app.should_stop:
            await asyncio.sleep(settings.changelog_flush_ms / 1000)
            try:
                w.metrics.changelog_records.inc(await w.commits.flush())
                await w.commits.recheck()
            except Exception:
                if app.should_stop:
                    # The producer closed under the flush: its events are not acknowledged, so they refold.
                    return
                raise

    @app.timer(settings.table_checkpoint_s, on_leader=False)
    async def checkpoint() -> None:
        await w.commits.checkpoint()
        w.metrics.checkpoints.inc()

    async def revoked(sender: Any, revoked: Any, **kwargs: Any) -> None:
        # The next owner recovers these partitions from their changelogs: hand over what is folded.
        w.progress.rebalanced()
        w.commits.revoked(set(revoked))
        await w.commits.hand_over(HAND_OVER_S)

    async def assigned(sender: Any, assigned: Any, **kwargs: Any) -> None:
        w.progress.rebalanced()

    app.on_partitions_revoked.connect(cast(Any, revoked))
    app.on_partitions_assigned.connect(cast(Any, assigned))

    async def observe(replay: dict[str, dict[str, list[int]]], positions: dict[Any, int]) -> None:
        """Metrics of the heartbeat's moment: replay left per topic, and the lag of every consumer."""
        w.metrics.generation.set(w.generation.number)
        for name, parts in replay.items():
            w.metrics.replay_remaining.labels(name).set(sum(max(0, t - d) for d, t in parts.values()))
        if w.mirror.offsets is not None:
            await record_lag(w.metrics.lag, "worker", w.mirror.offsets, positions)
            await record_lag(w.metrics.lag, "mirror", w.mirror.offsets, dict(w.mirror.positions))

    @app.timer(1.0, on_leader=False)
    async def heartbeat() -> None:
        assignment = app.consumer.assignment() if app.consumer else set()
        held: dict[str, set[int]] = {}
        replay: dict[str, dict[str, list[int]]] = {}
        positions: dict[Any, int] = {}
        for tp in assignment:
            name = tp.topic.removeprefix(settings.topic_prefix + ".")
            positions[tp] = done = await w.progress.folded_upto(name, tp)
            if name not in SOURCE_TOPICS:
                continue
            held.setdefault(name, set()).add(tp.partition)
            target = w.generation.targets.get(name, {}).get(str(tp.partition), 0)
            replay.setdefault(name, {})[str(tp.partition)] = [done, target]
        with contextlib.suppress(TimeoutError):
            # Left without lag figures, this heartbeat's metrics wait for the next one.
            await asyncio.wait_for(observe(replay, positions), OBSERVE_WAIT_S)
        tables: Any = app.tables
        caught_up = all(d >= t for parts in replay.values() for d, t in parts.values())
        ready = not app.rebalancing and tables.recovery.completed.is_set() and caught_up and w.mirror.caught_up.is_set()
        record = {
            "kind": "worker.heartbeat",
            "worker": worker_id,
            "generation": w.generation.number,
            "partitions": sorted(held.get("events", set())),
            "ready": ready,
            "replay": replay,
            "mirror": w.mirror.positions_by_name(),
            "sent_at": time.time(),
        }
        if app.should_stop:
            # Timers outlive the shutdown signal: a beat after `worker.stopped` would bring a stopped worker
            # back as ready, and a new edge would answer for up to HEARTBEAT_STALE_S with no worker.
            return
        await w.appender.append("status", worker_id, record)

    async def stopped(sender: Any, **kwargs: Any) -> None:
        await w.commits.close(HAND_OVER_S)
        record = msgspec.to_builtins({"kind": "worker.stopped", "worker": worker_id})
        await asyncio.wait_for(await w.appender.append("status", worker_id, record), 1.0)
        await control.stop()
        await w.appender.stop()

    # Faust's signal types do not admit a coroutine function; it awaits one all the same.
    app.on_before_shutdown.connect(cast(Any, stopped))
