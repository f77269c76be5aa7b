"""Keeps the worker's feature view level with the decisions and deliveries topics, every partition.

A group-less consumer (no join, no rebalance) reads the facts of every worker; its offsets live in
the feature store beside what they cover, so a restart resumes where the view left off.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from callscreen.settings import Settings
from processors.features import FeatureView

log = logging.getLogger(__name__)


class FactMirror:
    """Follows the decisions topic (decisions, settlements, blocks, patterns) and the deliveries topic."""

    def __init__(self, settings: Settings, view: FeatureView, consumer: Callable[..., AIOKafkaConsumer]) -> None:
        self.settings = settings
        self.view = view
        self.topics = [settings.topic("decisions"), settings.topic("deliveries")]
        self.make_consumer = consumer

    async def run(self) -> None:
        self.consumer = self.make_consumer(self.settings, fetch_max_wait_ms=self.settings.follow_max_wait_ms)
        await self.consumer.start()
        try:
            partitions = [TopicPartition(t, p) for t in self.topics for p in range(self.settings.partitions)]
            self.consumer.assign(partitions)
            for tp in partitions:
                self.consumer.seek(tp, int(self.view.store.get(f"off|{tp.topic}|{tp.partition}") or 0))
            while True:
                batches = await self.consumer.getmany(timeout_ms=1000)
                for tp, messages in batches.items():
                    for message in messages:
                        self.apply(orjson.loads(message.value))
                    self.view.store.put(f"off|{tp.topic}|{tp.partition}", messages[-1].offset + 1)
        finally:
            await self.consumer.stop()

    def apply(self, fact: dict[str, Any]) -> None:
        try:
            self.view.apply(fact)
        except (KeyError, TypeError, ValueError):
            log.exception("skipped a fact that does not fold", extra={"fact_id": fact.get("id")})
