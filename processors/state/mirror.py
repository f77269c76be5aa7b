"""The feature view's one writer (`FactMirror`), and the barrier a fold waits on for its facts (`Barrier`).

The mirror folds the decisions and deliveries topics, every partition.

It applies this worker's own facts as they are appended (`own`: a start then reads the facts of the
starts before it with no round trip through the broker) and every worker's facts as a group-less
consumer reads them back; applying is idempotent by fact id, so each counts once. The consumer's
offsets live in the feature store beside what they cover, so a restart resumes where the view left off.

While this worker folds every events partition, its own facts are the whole log's and are in the view
as they are appended: reading them back is bookkeeping, so the mirror then reads in batches, one fetch
per `BATCH_S` at most, instead of a fetch per record (a third of the broker's CPU while folding a backlog:
docs/decisions/0001-facts-mirror-reads-in-batches.md). While the partitions are shared, the barrier waits on
the mirror, which then fetches as soon as a record lands.

The barrier is read-your-writes through the log: a start waits until what it reads is in the feature view.

A start reads the blocks and patterns on its number, which the detector places when it folds the
facts of the starts before it. So before a start is folded the worker waits until its detector has
folded the last fact this worker appended about the number (the facts themselves are in the view
already: the mirror applies a worker's own facts as they are appended). A rebalance can hand the
partition to another worker, so the wait is bounded by `wait_s`. With the partitions shared between
workers, `level` waits for every fact in the log instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer, TopicPartition

from domain import keys
from domain.facts import Fact, decode_delivery, decode_fact
from domain.features import FeatureView
from infra.control import Generation
from infra.kafka import make_consumer
from infra.settings import Settings

log = logging.getLogger(__name__)
BATCH_S = 0.02
# Ids of own facts kept until read back. Each is read back within a batch or two; a fact that never is (its
# append failed) must not stay for the worker's life. Forgetting one costs only its read-back, applied
# again, which changes nothing: every apply is idempotent by fact id.
OWN_UNREAD_KEEP = 16_384


class _Identified(msgspec.Struct):
    id: str


# Reads a fact's id alone, skipping the rest of the record.
_fact_id = msgspec.json.Decoder(_Identified)


class FactMirror:
    def __init__(
        self, settings: Settings, view: FeatureView, generation: Generation, alone: Callable[[], bool]
    ) -> None:
        self.settings = settings
        # True while this worker folds every events partition (`Progress.holds_every_partition`).
        self.alone = alone
        self.view = view
        self.decisions = settings.topic("decisions")
        self.deliveries = settings.topic("deliveries")
        self.caught_up = asyncio.Event()
        self.positions: dict[TopicPartition, int] = {}
        self.moved = asyncio.Condition()
        self.consumer: AIOKafkaConsumer | None = None
        # Ids of the facts `own` applied and the consumer has not read back yet, the oldest first, at most
        # `OWN_UNREAD_KEEP` (a dict: an ordered set).
        self._own_unread: dict[str, None] = {}
        # End offsets come from a consumer that never fetches: a broker answers a connection's requests in
        # order, so asking the following consumer would wait out its long poll.
        self.offsets: AIOKafkaConsumer | None = None
        self.targets = {
            TopicPartition(settings.topic(name), int(p)): offset
            for name in ("decisions", "deliveries")
            for p, offset in generation.targets.get(name, {}).items()
            if offset > 0
        }

    async def run(self) -> None:
        consumer = make_consumer(self.settings, follower=True)
        offsets = make_consumer(self.settings)
        await consumer.start()
        await offsets.start()
        self.consumer, self.offsets = consumer, offsets
        try:
            partitions = [
                TopicPartition(t, p) for t in (self.decisions, self.deliveries) for p in range(self.settings.partitions)
            ]
            consumer.assign(partitions)
            positions = self.positions = {
                tp: int(self.view.store.get(keys.View.offset(tp.topic, tp.partition)) or 0) for tp in partitions
            }
            for tp, offset in positions.items():
                consumer.seek(tp, offset)
            # No event is folded before the view holds every fact the log holds now (`caught_up`): after a
            # crash, the view can lack facts its last flush did not write, and a start's refold must find
            # its decision, already given and appended, rather than decide again on a view that other
            # partitions' facts have moved since.
            for tp, end in (await offsets.end_offsets(partitions)).items():
                self.targets[tp] = max(self.targets.get(tp, 0), end)
            self._check()
            while True:
                batches = await consumer.getmany(timeout_ms=1000)
                for tp, messages in batches.items():
                    for message in messages:
                        self.apply(tp.topic, message.value)
                    positions[tp] = messages[-1].offset + 1
                    self.view.store.put(keys.View.offset(tp.topic, tp.partition), positions[tp])
                self._check()
                async with self.moved:
                    self.moved.notify_all()
                if batches and self.caught_up.is_set() and self.alone():
                    await asyncio.sleep(BATCH_S)
        finally:
            await consumer.stop()
            await offsets.stop()

    def own(self, fact: Fact) -> None:
        """A fact this worker is appending: in the view at once, again (a no-op) when read back.

        Like every put to the view, it reaches RocksDB with the next changelog flush
        (`processors/state/rocks.py`); a crash before it loses only what the log gives back (`run`) or
        an uncommitted event's refold applies again.
        """
        self.view.apply(fact)
        self._own_unread[fact.id] = None
        if len(self._own_unread) > OWN_UNREAD_KEEP:
            del self._own_unread[next(iter(self._own_unread))]

    def apply(self, topic: str, raw: bytes) -> None:
        try:
            if topic == self.decisions:
                if self._own_unread and self._read_back(raw):
                    return
                self.view.apply(decode_fact(raw))
            else:
                self.view.apply_delivery(decode_delivery(raw))
        except msgspec.ValidationError:
            log.exception("skipped a record the view cannot read", extra={"topic": topic})

    def _read_back(self, raw: bytes) -> bool:
        """True for a fact `own` applied already: applied again it would change nothing (every apply is
        idempotent by fact id), so only its id is decoded and the view is not read."""
        fact_id = _fact_id.decode(raw).id
        if fact_id not in self._own_unread:
            return False
        del self._own_unread[fact_id]
        return True

    def _check(self) -> None:
        """Events may be folded once the view holds every fact the rebuild found and the log held at start."""
        if not self.caught_up.is_set() and all(self.positions.get(tp, 0) >= end for tp, end in self.targets.items()):
            self.caught_up.set()

    async def applied(self, wanted: dict[TopicPartition, int], timeout_s: float) -> bool:
        """Wait until the view has applied every record below `wanted`'s offsets; False past the timeout."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s), self.moved:
                await self.moved.wait_for(lambda: all(self.positions.get(tp, 0) >= end for tp, end in wanted.items()))
                return True
        return False

    async def ends(self) -> dict[TopicPartition, int]:
        """The end offsets of every partition the mirror follows, as of now."""
        if self.offsets is None:
            await self.caught_up.wait()
        assert self.offsets is not None
        found: dict[TopicPartition, int] = await self.offsets.end_offsets(list(self.positions))
        return found

    def positions_by_name(self) -> dict[str, int]:
        return {f"{tp.topic}|{tp.partition}": offset for tp, offset in self.positions.items()}


log = logging.getLogger(__name__)
# Entries kept before a prune. Each holds a future and its record metadata (about half a kilobyte), and a
# worker sees every number it protects: at 10,000 this dict alone grew the worker by megabytes in a soak.
KEEP = 1_000


class Barrier:
    def __init__(self, mirror: FactMirror, wait_s: float) -> None:
        self.mirror = mirror
        self.wait_s = wait_s
        # The ack of the last fact this worker appended about each number (account:number).
        self.last_fact: dict[str, asyncio.Future[Any]] = {}
        self._prune_at = KEEP
        self.detected: dict[int, int] = {}
        self.detector_moved = asyncio.Event()

    def appended(self, number_key: str, ack: asyncio.Future[Any]) -> None:
        self.last_fact[number_key] = ack
        if len(self.last_fact) > self._prune_at:
            # Only facts the detector has folded go: an acknowledged one it has not yet folded is still waited on.
            self.last_fact = {k: a for k, a in self.last_fact.items() if not self._folded(a)}
            # With the detector far behind most entries stay; pruning again at twice what stayed keeps
            # the cost of pruning constant per append.
            self._prune_at = max(KEEP, 2 * len(self.last_fact))

    def detector_folded(self, partition: int, offset: int) -> None:
        self.detected[partition] = offset + 1
        self.detector_moved.set()

    def _folded(self, ack: asyncio.Future[Any]) -> bool:
        if not ack.done() or ack.cancelled() or ack.exception() is not None:
            return False
        metadata = ack.result()
        return self._past(metadata.partition, metadata.offset)

    def _past(self, partition: int, offset: int) -> bool:
        """The detector has folded the fact at this offset: what the prune and the wait both ask."""
        return self.detected.get(partition, 0) > offset

    async def consequences_of(self, number_key: str) -> None:
        """Until the detector has folded the last fact this worker appended about the number."""
        ack = self.last_fact.pop(number_key, None)
        if ack is None:
            return
        metadata = await ack
        try:
            await asyncio.wait_for(self._detector_past(metadata.partition, metadata.offset), self.wait_s)
        except TimeoutError:
            log.warning("detector behind a fact this worker appended; folding without waiting")

    async def _detector_past(self, partition: int, offset: int) -> None:
        while not self._past(partition, offset):
            self.detector_moved.clear()
            await self.detector_moved.wait()

    async def level(self) -> None:
        """Until the view holds every fact appended before this call, whichever worker appended it."""
        if not await self.mirror.applied(await self.mirror.ends(), self.wait_s):
            log.warning("facts mirror behind the log; folding on what it holds")
