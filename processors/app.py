"""The Faust app: one worker's agents, wired around the pure domain functions."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
import uuid
from pathlib import Path
from typing import Any, cast

import faust
import orjson

from callscreen.control import SOURCE_TOPICS, Generation, latest
from callscreen.follow import TopicFollower
from callscreen.kafka import MEMORY_BATCH_BYTES, bootstrap, fetch_wait_ms, make_consumer, tls_context
from callscreen.metrics import record_lag
from callscreen.metrics import serve as serve_metrics
from callscreen.settings import Settings
from processors import agents_alerts, agents_calls, agents_detect, queries
from processors.detectors import rules_from
from processors.faust_tuning import tune_consumer
from processors.features import FeatureView
from processors.live import thresholds_from
from processors.mirror import FactMirror
from processors.policy import load_policy
from processors.rocks import RocksBudget
from processors.runtime import DirectProducer, Runtime
from processors.store import RocksStore


def make_faust_app(settings: Settings, app_id: str, datadir: Path) -> faust.App:
    """A Faust app with the worker's settings (also the bench's Faust floor)."""
    tune_consumer(fetch_wait_ms(settings), settings.memory_broker)
    extra: dict[str, Any] = {}
    if settings.memory_broker:
        extra["producer_max_batch_size"] = MEMORY_BATCH_BYTES
    credentials = faust_credentials(settings)
    if credentials is not None:
        extra["broker_credentials"] = credentials
    return faust.App(
        app_id,
        broker="kafka://" + bootstrap(settings),
        store="rocksdb://",
        datadir=str(datadir),
        topic_partitions=settings.partitions,
        topic_replication_factor=1,
        web_enabled=False,
        consumer_auto_offset_reset="earliest",
        processing_guarantee="at_least_once",
        producer_acks=-1,
        producer_linger=0.0,
        broker_commit_every=100,
        broker_session_timeout=10.0,
        broker_heartbeat_interval=1.0,
        broker_rebalance_timeout=10.0,
        broker_commit_interval=0.5,
        stream_wait_empty=False,
        key_serializer="raw",
        value_serializer="raw",
        **extra,
    )


def faust_credentials(settings: Settings) -> Any:
    """The deployment's TLS and SASL settings in Faust's terms (aiokafka gets them from callscreen.kafka)."""
    context = tls_context(settings)
    if settings.kafka_security_protocol.upper().startswith("SASL"):
        return faust.SASLCredentials(
            username=settings.kafka_sasl_username,
            password=settings.kafka_sasl_password,
            ssl_context=context,
            mechanism=settings.kafka_sasl_mechanism.upper(),
        )
    if context is not None:
        return faust.SSLCredentials(context)
    return None


def create_app(settings: Settings, worker_dir: Path, generation: Generation) -> faust.App:
    app = make_faust_app(settings, generation.app_id(settings), worker_dir / "faust")
    rocks = RocksBudget(settings.rocksdb_memory_mb)
    rt = Runtime(
        settings=settings,
        app=app,
        view=FeatureView(RocksStore(worker_dir / "features", rocks)),
        policy=load_policy(settings),
        live=thresholds_from(settings),
        detectors=rules_from(settings),
        direct=DirectProducer(settings),
        rocks=rocks,
        generation=generation,
    )
    rt.metrics.rocksdb_bytes.set_function(rocks.cache.get_usage)
    agents_calls.register(rt)
    agents_detect.register(rt)
    agents_alerts.register(rt)
    register_queries(rt)
    register_housekeeping(rt)
    serve_metrics(settings, rt.metrics.registry)
    return app


def register_queries(rt: Runtime) -> None:
    @rt.app.agent(rt.topic("queries"), concurrency=1)
    async def answer_queries(stream: Any) -> None:
        async for event, _ in rt.folds(stream, "queries"):
            question = orjson.loads(event.value)
            if rt.folded("queries", event):
                continue
            status, body = queries.answer(
                question,
                event.message.partition,
                rt.view,
                lambda key: rt.read("calls", key),
                lambda key: rt.read("call_index", key),
                lambda key: rt.read("alert_store", key),
                rt.settings,
                rt.policy,
            )
            await rt.reply(event, status, body)


def register_housekeeping(rt: Runtime) -> None:
    app, settings = rt.app, rt.settings
    mirror = FactMirror(settings, rt.view, make_consumer, rt.generation, rt.mirror_caught_up)
    rt.level_facts = mirror.level
    worker_id = f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"

    def on_control(record: dict[str, Any]) -> None:
        if latest([record]).number > rt.generation.number:
            # A rebuild started a new generation: stop cleanly; the supervisor starts us in it.
            os.kill(os.getpid(), signal.SIGTERM)

    control = TopicFollower(settings, settings.topic("control"), on_control)

    @app.task
    async def follow_facts() -> None:
        await mirror.run()

    @app.task
    async def follow_control() -> None:
        await control.start()

    async def observe(replay: dict[str, dict[str, list[int]]], positions: dict[Any, int]) -> None:
        """Metrics of the heartbeat's moment: replay left per topic, and the lag of every consumer."""
        rt.metrics.generation.set(rt.generation.number)
        for name, parts in replay.items():
            rt.metrics.replay_remaining.labels(name).set(sum(max(0, t - d) for d, t in parts.values()))
        if mirror.offsets is not None:
            await record_lag(rt.metrics.lag, "worker", mirror.offsets, positions)
            await record_lag(rt.metrics.lag, "mirror", mirror.offsets, dict(mirror.positions))

    @app.task
    async def flush_changelogs() -> None:
        """Every `changelog_flush_ms` after the last flush ended (a flush under load can take longer)."""
        while not app.should_stop:
            await asyncio.sleep(settings.changelog_flush_ms / 1000)
            try:
                rt.metrics.changelog_records.inc(await rt.flush_changelogs())
            except Exception:
                if app.should_stop:
                    # The producer closed under the flush: its events are not acknowledged, so they refold.
                    return
                raise

    async def revoked(sender: Any, revoked: Any, **kwargs: Any) -> None:
        # The next owner recovers these partitions from their changelogs: hand over what is folded.
        await rt.flush_changelogs()

    app.on_partitions_revoked.connect(cast(Any, revoked))

    @app.timer(1.0, on_leader=False)
    async def heartbeat() -> None:
        assignment = app.consumer.assignment() if app.consumer else set()
        held: dict[str, set[int]] = {}
        replay: dict[str, dict[str, list[int]]] = {}
        positions: dict[Any, int] = {}
        for tp in assignment:
            name = tp.topic.removeprefix(settings.topic_prefix + ".")
            positions[tp] = done = await rt.folded_upto(name, tp)
            if name not in SOURCE_TOPICS:
                continue
            held.setdefault(name, set()).add(tp.partition)
            target = rt.generation.targets.get(name, {}).get(str(tp.partition), 0)
            replay.setdefault(name, {})[str(tp.partition)] = [done, target]
        await observe(replay, positions)
        tables: Any = app.tables
        caught_up = all(d >= t for parts in replay.values() for d, t in parts.values())
        ready = (
            not app.rebalancing and tables.recovery.completed.is_set() and caught_up and rt.mirror_caught_up.is_set()
        )
        record = {
            "kind": "worker.heartbeat",
            "worker": worker_id,
            "generation": rt.generation.number,
            "partitions": sorted(held.get("events", set())),
            "ready": ready,
            "replay": replay,
            "mirror": {f"{tp.topic}|{tp.partition}": offset for tp, offset in mirror.positions.items()},
            "sent_at": time.time(),
        }
        await rt.send("status", worker_id, record)

    async def stopped(sender: Any, **kwargs: Any) -> None:
        await rt.flush_changelogs()
        record = {"kind": "worker.stopped", "worker": worker_id}
        await asyncio.wait_for(await rt.send("status", worker_id, record), 1.0)
        await control.stop()
        await rt.direct.stop()

    # Faust's signal types do not admit a coroutine function; it awaits one all the same.
    app.on_before_shutdown.connect(cast(Any, stopped))
