"""What every agent of a worker shares: settings, rules, the feature view, tables and a producer."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import faust
import orjson
from aiokafka import AIOKafkaProducer
from faust.stores.rocksdb import Store as RocksDBStore
from faust.types import EventT

from callscreen.control import Generation
from callscreen.kafka import make_producer, partition_for
from callscreen.settings import Settings
from callscreen.topics import topic_specs
from processors import call_index
from processors.detectors import DetectorRules
from processors.features import FeatureView
from processors.live import LiveThresholds
from processors.metrics import WorkerMetrics
from processors.outbox import Outbox
from processors.policy import Policy
from processors.replies import ReplyChannels
from processors.rocks import BudgetedFaustOptions, RocksBudget
from processors.write_behind import WriteBehindTable


class DirectProducer:
    """A plain aiokafka producer for replies, facts and alerts, fed through an `Outbox`.

    Faust's producer queues sends in a buffer flushed by a background task, which added
    milliseconds to every answer; the answer path sends directly instead.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.producer: AIOKafkaProducer | None = None
        self.lock = asyncio.Lock()
        self.outbox = Outbox(self.get)
        self.partitions = {spec.name: spec.partitions for spec in topic_specs(settings)}

    async def get(self) -> AIOKafkaProducer:
        if self.producer is None:
            async with self.lock:
                if self.producer is None:
                    producer = make_producer(self.settings)
                    await producer.start()
                    self.producer = producer
        return self.producer

    async def send(self, topic: str, key: str, value: bytes, partition: int | None = None) -> asyncio.Future[Any]:
        """Queue a record (keyed records go where Kafka's default partitioner puts them); returns its ack."""
        if partition is None:
            partition = partition_for(key, self.partitions[topic])
        return await self.outbox.send(topic, partition, key.encode(), value)

    async def stop(self) -> None:
        await self.outbox.stop()
        if self.producer is not None:
            await self.producer.stop()


log = logging.getLogger(__name__)
CONSEQUENCES_WAIT_S = 1.0
FACT_ACKS_KEEP = 10_000


@dataclass
class Runtime:
    settings: Settings
    app: faust.App
    view: FeatureView
    policy: Policy
    live: LiveThresholds
    detectors: DetectorRules
    direct: DirectProducer
    rocks: RocksBudget
    generation: Generation = field(default_factory=Generation)
    tables: dict[str, WriteBehindTable] = field(default_factory=dict)
    # Next offset to fold per (topic short name, partition): the progress a heartbeat reports.
    progress: dict[tuple[str, int], int] = field(default_factory=dict)
    mirror_caught_up: asyncio.Event = field(default_factory=asyncio.Event)
    metrics: WorkerMetrics = field(default_factory=WorkerMetrics)
    channels: ReplyChannels = field(default_factory=ReplyChannels)
    _settling: set[asyncio.Task[bool]] = field(default_factory=set)
    # Folded events whose table writes are not yet on a changelog: acknowledged by the next flush.
    _unflushed: list[tuple[Any, Any, list[Any]]] = field(default_factory=list)
    _flush_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _last_flush: asyncio.Task[bool] | None = None
    # Waits until the feature view holds every fact in the log (the facts mirror's barrier).
    level_facts: Callable[[], Awaitable[None]] | None = None
    # The ack of the latest decision fact this worker appended per decisions key (account:number), and
    # how far its detector has folded each decisions partition: together they say when that number's
    # blocks and patterns are applied.
    fact_acks: dict[str, Any] = field(default_factory=dict)
    detected: dict[int, int] = field(default_factory=dict)
    detector_moved: asyncio.Event = field(default_factory=asyncio.Event)

    def holds_every_partition(self) -> bool:
        """True when this worker alone folds the events topic: its own facts are then the whole view."""
        topic = self.settings.topic("events")
        held = {tp.partition for tp in self.app.consumer.assignment() if tp.topic == topic}
        return len(held) == self.settings.partitions

    async def folds(self, stream: Any, name: str) -> AsyncIterator[tuple[Any, list[Any]]]:
        """The stream's events, each with a list for the acks of what folding it appended.

        Faust may commit an event's offset only once its table writes are on a changelog (the next
        `flush_changelogs`) and the records it appended are durable; the fold of the next event waits
        for neither (a crash before they land refolds the event: folds are idempotent).
        """
        manual = stream.noack()
        histogram = self.metrics.fold_seconds.labels(name)
        async for event in manual.events():
            started = time.perf_counter()
            pending: list[Any] = []
            yield event, pending
            histogram.observe(time.perf_counter() - started)
            self._unflushed.append((manual, event, pending))

    async def flush_changelogs(self) -> int:
        """Send every table's dirty keys to its changelog; once they, every earlier flush's and what the
        folds appended are durable, acknowledge the events folded before this flush began. Flushes never
        interleave. Returns how many changelog records it sent."""
        async with self._flush_lock:
            held, self._unflushed = self._unflushed, []
            written: list[Any] = []
            for table in self.tables.values():
                written += await table.flush_changelog(self.direct.outbox.send)
            # An event's writes may have gone out with an earlier flush, still in flight.
            task = asyncio.create_task(self._ack_when_durable(held, written, self._last_flush))
            self._last_flush = task
            self._settling.add(task)
            task.add_done_callback(self._settling.discard)
            return len(written)

    async def _ack_when_durable(
        self, held: list[tuple[Any, Any, list[Any]]], written: list[Any], previous: asyncio.Task[bool] | None
    ) -> bool:
        """True once the flush's records are durable and its events acknowledged."""
        if previous is not None and not await previous:
            return False
        try:
            for ack in written + [ack for _, _, pending in held for ack in pending]:
                await ack
        except Exception as exc:
            # The fold is ahead of the log: stop, so a restart refolds from the last committed offset.
            log.exception("a record the fold appended was not acknowledged; stopping the worker")
            await self.app.crash(exc)
            return False
        for stream, event, _ in held:
            await stream.ack(event)
        return True

    def detector_folded(self, partition: int, offset: int) -> None:
        self.detected[partition] = offset + 1
        self.detector_moved.set()

    def appended_fact(self, key: str, ack: Any) -> None:
        self.fact_acks[key] = ack
        if len(self.fact_acks) > FACT_ACKS_KEEP:
            self.fact_acks = {k: a for k, a in self.fact_acks.items() if not self._applied(a)}

    def _applied(self, ack: Any) -> bool:
        if not ack.done() or ack.cancelled() or ack.exception() is not None:
            return False
        return bool(self.detected.get(ack.result().partition, 0) > ack.result().offset)

    async def consequences_applied(self, key: str) -> None:
        """Wait until the detector has folded the last fact this worker appended about `key` (one worker
        only: it holds every decisions partition), so an event sees the blocks and patterns placed for
        its number by the events before it. Other numbers' facts do not hold it up."""
        ack = self.fact_acks.get(key)
        if ack is None:
            return
        metadata = await ack
        try:
            await asyncio.wait_for(self._detector_past(metadata.partition, metadata.offset), CONSEQUENCES_WAIT_S)
        except TimeoutError:
            # A rebalance can hand the partition to another worker's detector: never wait forever.
            log.warning("detector behind a fact this worker appended; answering without waiting")
        if self.fact_acks.get(key) is ack:
            del self.fact_acks[key]

    async def _detector_past(self, partition: int, offset: int) -> None:
        while self.detected.get(partition, 0) <= offset:
            self.detector_moved.clear()
            await self.detector_moved.wait()

    def folded(self, name: str, event: EventT[Any]) -> bool:
        """Note an event as folded; True when it is a replay (below the generation's targets)."""
        partition, offset = event.message.partition, event.message.offset
        self.progress[(name, partition)] = offset + 1
        return self.generation.replaying(name, partition, offset)

    async def folded_upto(self, name: str, tp: Any) -> int:
        """How far this worker has folded a partition it holds (its position until an event arrives)."""
        done = self.progress.get((name, tp.partition))
        if done is None:
            done = await self.app.consumer.position(tp) or 0
        return int(done)

    async def replay_done(self, name: str) -> bool:
        """True when every partition of `name` this worker holds is past the generation's targets."""
        targets = self.generation.targets.get(name, {})
        topic = self.settings.topic(name)
        for tp in self.app.consumer.assignment():
            if tp.topic == topic and await self.folded_upto(name, tp) < targets.get(str(tp.partition), 0):
                return False
        return True

    def topic(self, name: str) -> Any:
        """A Faust topic of raw bytes (the service's records are JSON it encodes itself)."""
        return self.app.topic(self.settings.topic(name), key_type=bytes, value_type=bytes)

    def table(self, name: str) -> WriteBehindTable:
        if name not in self.tables:
            table = WriteBehindTable(
                self.app,
                name=name,
                beacon=self.app.tables.beacon,
                default=None,
                partitions=self.settings.partitions,
                key_type=bytes,
                value_type=bytes,
            )
            self.app.tables.add(table)
            store = table.data
            if isinstance(store, RocksDBStore):
                # Faust gives each table database its own cache; the worker's budget is shared.
                store.rocksdb_options = BudgetedFaustOptions(self.rocks)
            self.tables[name] = table
        return self.tables[name]

    def read(self, table: str, key: str) -> Any:
        raw = self.tables[table].get(key.encode())
        return orjson.loads(raw) if raw is not None else None

    def write(self, table: str, key: str, value: Any) -> None:
        self.tables[table][key.encode()] = orjson.dumps(value)

    def index(self, table: str, account: str, partition: int, entry: list[Any], space: str = "calls") -> None:
        """Add `entry` to the account's listing index kept in `table` (`processors.call_index`)."""
        read = functools.partial(self.read, table)
        for key, value in call_index.additions(read, account, partition, entry, space).items():
            self.write(table, key, value)

    def delete(self, table: str, key: str) -> None:
        self.tables[table].pop(key.encode(), None)

    async def send(self, topic: str, key: str, value: dict[str, Any], partition: int | None = None) -> Any:
        """Queue a record on the direct producer; returns the future of its ack."""
        return await self.direct.send(self.settings.topic(topic), key, orjson.dumps(value), partition)

    async def reply(self, event: EventT[Any], status: int, body: dict[str, Any]) -> None:
        """Answer the edge that asked: over TCP when it gave an address, else (or when that fails) on the
        replies partition it named. Records without a correlation id are replays."""
        headers = dict(event.headers or {})
        partition, corr, reply_to = headers.get("reply-partition"), headers.get("corr"), headers.get("reply-to")
        if partition is None or corr is None:
            return
        answer = {"status": status, "body": body}
        if reply_to is not None and await self.channels.send(reply_to.decode(), {"corr": corr.decode(), **answer}):
            return
        await self.send("replies", corr.decode(), answer, partition=int(partition))
