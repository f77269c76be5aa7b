"""Keeps the worker's feature view level with the decisions and deliveries topics, every partition.

A group-less consumer (no join, no rebalance) reads the facts of every worker; its offsets live in
the feature store beside what they cover, so a restart resumes where the view left off.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from callscreen.control import Generation
from callscreen.settings import Settings
from processors.features import FeatureView

log = logging.getLogger(__name__)


class FactMirror:
    """Follows the decisions topic (decisions, settlements, blocks, patterns) and the deliveries topic."""

    def __init__(
        self,
        settings: Settings,
        view: FeatureView,
        consumer: Callable[..., AIOKafkaConsumer],
        generation: Generation,
        caught_up: asyncio.Event,
    ) -> None:
        self.settings = settings
        self.view = view
        self.topics = [settings.topic("decisions"), settings.topic("deliveries")]
        self.make_consumer = consumer
        self.caught_up = caught_up
        self.positions: dict[TopicPartition, int] = {}
        self.moved = asyncio.Condition()
        self.consumer: AIOKafkaConsumer | None = None
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
        consumer = self.make_consumer(self.settings, follower=True)
        offsets = self.make_consumer(self.settings)
        await consumer.start()
        await offsets.start()
        self.consumer, self.offsets = consumer, offsets
        try:
            partitions = [TopicPartition(t, p) for t in self.topics for p in range(self.settings.partitions)]
            consumer.assign(partitions)
            positions = self.positions = {
                tp: int(self.view.store.get(f"off|{tp.topic}|{tp.partition}") or 0) for tp in partitions
            }
            for tp, offset in positions.items():
                consumer.seek(tp, offset)
            self._check(positions)
            while True:
                batches = await consumer.getmany(timeout_ms=1000)
                for tp, messages in batches.items():
                    for message in messages:
                        self.apply(orjson.loads(message.value))
                    positions[tp] = messages[-1].offset + 1
                    self.view.store.put(f"off|{tp.topic}|{tp.partition}", positions[tp])
                self._check(positions)
                async with self.moved:
                    self.moved.notify_all()
        finally:
            await consumer.stop()
            await offsets.stop()

    async def level(self) -> None:
        """Wait until the view holds every fact appended before this call: another worker's decisions are
        then visible to the next event, as they are when one worker holds every partition."""
        if self.offsets is None:
            await self.caught_up.wait()
            assert self.offsets is not None
        ends = await self.offsets.end_offsets(list(self.positions))
        try:
            async with asyncio.timeout(self.settings.answer_deadline_s), self.moved:
                await self.moved.wait_for(lambda: all(self.positions[tp] >= end for tp, end in ends.items()))
        except TimeoutError:
            log.warning("facts mirror behind the log; deciding on what it holds")

    def _check(self, positions: dict[TopicPartition, int]) -> None:
        """A replay of events may start once the view holds every fact the rebuild found."""
        if not self.caught_up.is_set() and all(positions.get(tp, 0) >= end for tp, end in self.targets.items()):
            self.caught_up.set()

    def apply(self, fact: dict[str, Any]) -> None:
        try:
            self.view.apply(fact)
        except (KeyError, TypeError, ValueError):
            log.exception("skipped a fact that does not fold", extra={"fact_id": fact.get("id")})
