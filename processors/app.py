"""The Faust app: agents that fold the events and queries topics with the pure domain functions."""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from pathlib import Path
from typing import Any

import faust
from aiokafka import AIOKafkaProducer
import orjson
from faust.types import EventT

from callscreen.kafka import SINGLE_RECORD_BATCH_BYTES, make_consumer, make_producer
from callscreen.plans import plan_limits
from callscreen.settings import Settings
from callscreen.times import now_ms
from processors import call_index, calls, queries
from processors.faust_tuning import set_fetch_max_wait
from processors.features import FeatureView
from processors.live import thresholds_from
from processors.mirror import FactMirror
from processors.policy import load_policy
from processors.store import RocksStore

log = logging.getLogger("callscreen.worker")

TICK_REPEAT_MS = 5000


class DirectProducer:
    """A plain aiokafka producer for replies and facts.

    Faust's producer queues sends in a buffer flushed by a background task, which added
    milliseconds to every answer; the answer path sends directly instead.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.producer: AIOKafkaProducer | None = None
        self.lock = asyncio.Lock()

    async def get(self) -> AIOKafkaProducer:
        if self.producer is None:
            async with self.lock:
                if self.producer is None:
                    producer = make_producer(self.settings)
                    await producer.start()
                    self.producer = producer
        return self.producer

    async def stop(self) -> None:
        if self.producer is not None:
            await self.producer.stop()


def create_app(settings: Settings, worker_dir: Path) -> faust.App:
    set_fetch_max_wait(settings.fetch_max_wait_ms)
    extra: dict[str, Any] = {}
    if settings.embedded_broker:
        extra["producer_max_batch_size"] = SINGLE_RECORD_BATCH_BYTES
    app = faust.App(
        settings.app_id,
        broker=settings.broker,
        store="rocksdb://",
        datadir=str(worker_dir / "faust"),
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
        rocksdb_options={"block_cache_size": 8 * 1024 * 1024, "block_cache_compressed_size": 0},
        **extra,
    )
    policy = load_policy(settings)
    view = FeatureView(RocksStore(worker_dir / "features"))
    worker_id = f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"

    def raw_topic(name: str) -> Any:
        return app.topic(settings.topic(name), key_type=bytes, value_type=bytes)

    events = raw_topic("events")
    events_topic_name = settings.topic("events")
    query_topic = raw_topic("queries")
    decisions_topic = settings.topic("decisions")
    replies_topic = settings.topic("replies")
    status = raw_topic("status")
    calls_table = app.Table("calls", default=None, partitions=settings.partitions, key_type=bytes, value_type=bytes)
    index_table = app.Table("call_index", default=None, partitions=settings.partitions, key_type=bytes, value_type=bytes)
    sweep_table = app.Table("sweeps", default=None, partitions=settings.partitions, key_type=bytes, value_type=bytes)
    live_rules = thresholds_from(settings)
    alerts_topic = settings.topic("alerts")
    ticked: dict[str, float] = {}

    def read(table: Any, key: str) -> Any:
        raw = table.get(key.encode())
        return orjson.loads(raw) if raw is not None else None

    def write(table: Any, key: str, value: Any) -> None:
        table[key.encode()] = orjson.dumps(value)

    def index_call(call: dict[str, Any], partition: int) -> None:
        account, at = call["account_id"], call["started_at"]
        days = call_index.days_key(account, partition)
        write(index_table, days, call_index.with_day(read(index_table, days) or [], at))
        day = call_index.day_key(account, partition, at - at % call_index.DAY_MS)
        entry = [at, call["call_id"], call["number"], call["caller"], call["action"]]
        write(index_table, day, call_index.with_entry(read(index_table, day) or [], entry))
    mirror = FactMirror(settings, view, make_consumer)

    direct = DirectProducer(settings)

    async def reply(event: EventT, status_code: int, body: dict[str, Any]) -> None:
        headers = dict(event.headers or {})
        partition, corr = headers.get("reply-partition"), headers.get("corr")
        if partition is None or corr is None:
            return
        producer = await direct.get()
        await producer.send(
            replies_topic, orjson.dumps({"status": status_code, "body": body}), key=corr, partition=int(partition)
        )

    @app.agent(events, concurrency=1)
    async def fold_events(stream: Any) -> None:
        async for event in stream.events():
            record = orjson.loads(event.value)
            key = event.key.decode()
            state = read(calls_table, key)
            target = calls.alias_target(state, record, view)
            if target is not None:
                await events.send(key=f"{record['account_id']}:{target}".encode(), value=event.value, headers=event.headers)
                continue
            outcome = calls.handle(
                state, record, view, policy, plan_limits(settings, record.get("plan", "")), live_rules, settings.max_call_turns
            )
            producer = await direct.get()
            sends = [
                await producer.send(decisions_topic, orjson.dumps(fact), key=fact["account_id"].encode())
                for fact in outcome.facts
            ] + [
                await producer.send(alerts_topic, orjson.dumps(alert), key=alert["account_id"].encode())
                for alert in outcome.alerts
            ]
            for fact in outcome.facts:
                view.apply(fact)
            if outcome.state is not None:
                write(calls_table, key, outcome.state)
                if state is None:
                    index_call(outcome.state, event.message.partition)
                watch(key, calls.sweep_due(outcome.state, live_rules), event.message.partition)
            await reply(event, outcome.status, outcome.body)
            for sent in sends:
                await sent

    def watch(key: str, due: int | None, partition: int) -> None:
        name = f"sweep|{partition}"
        entries = read(sweep_table, name) or {}
        if due is None and key not in entries:
            return
        if due is None:
            del entries[key]
        else:
            entries[key] = due
        write(sweep_table, name, entries)

    @app.timer(settings.silent_sweep_s, on_leader=False)
    async def sweep() -> None:
        """Appends a tick for each call whose silence may have tripped a flag; the fold decides."""
        if app.consumer is None or app.rebalancing:
            return
        now = now_ms()
        producer = await direct.get()
        for tp in app.consumer.assignment():
            if tp.topic != events.get_topic_name():
                continue
            for key, due in (read(sweep_table, f"sweep|{tp.partition}") or {}).items():
                if due > now or now - ticked.get(key, 0.0) < TICK_REPEAT_MS:
                    continue
                ticked[key] = now
                account, call_id = key.split(":", 1)
                tick = {"type": "tick", "id": uuid.uuid4().hex, "at": now, "account_id": account, "call_id": call_id}
                await producer.send(events_topic_name, orjson.dumps(tick), key=key.encode(), partition=tp.partition)

    @app.agent(query_topic, concurrency=1)
    async def answer_queries(stream: Any) -> None:
        async for event in stream.events():
            record = orjson.loads(event.value)
            status_code, body = queries.answer(
                record,
                event.message.partition,
                view,
                lambda key: read(calls_table, key),
                lambda key: read(index_table, key),
                settings,
                policy,
            )
            await reply(event, status_code, body)

    @app.task
    async def follow_facts() -> None:
        await mirror.run()

    @app.timer(1.0, on_leader=False)
    async def heartbeat() -> None:
        assignment = app.consumer.assignment() if app.consumer else set()
        held = sorted(tp.partition for tp in assignment if tp.topic == events.get_topic_name())
        ready = not app.rebalancing and app.tables.recovery.completed.is_set()
        record = {"kind": "worker.heartbeat", "worker": worker_id, "partitions": held, "ready": ready}
        await status.send(key=worker_id.encode(), value=orjson.dumps(record))

    @app.on_before_shutdown.connect
    async def stopped(app: faust.App, **kwargs: Any) -> None:
        record = {"kind": "worker.stopped", "worker": worker_id}
        await asyncio.wait_for(status.send(key=worker_id.encode(), value=orjson.dumps(record)), 1.0)
        await direct.stop()

    return app
