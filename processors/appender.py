"""The worker's appends (facts, alerts, ticks, replies on the topic, changelogs): a plain producer.

Faust's producer queues sends in a buffer flushed by a background task, which added milliseconds to
every answer; the worker sends directly instead, through an `Outbox` that keeps each partition's
records in order without holding up the fold. Every append returns the future of its ack.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from aiokafka import AIOKafkaProducer

from infra.kafka import make_producer, partition_for
from infra.settings import Settings
from infra.topics import topic_specs
from processors.outbox import Outbox

Ack = asyncio.Future[Any]


class Appender:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.producer: AIOKafkaProducer | None = None
        self.lock = asyncio.Lock()
        self.outbox = Outbox(self.get, together=not settings.memory_broker)
        self.partitions = {spec.name: spec.partitions for spec in topic_specs(settings)}

    async def get(self) -> AIOKafkaProducer:
        if self.producer is None:
            async with self.lock:
                if self.producer is None:
                    producer = make_producer(self.settings)
                    await producer.start()
                    self.producer = producer
        return self.producer

    async def send_raw(self, topic: str, key: str, value: bytes, partition: int | None = None) -> Ack:
        """Queue a record on a full topic name (keyed records go where Kafka's partitioner puts them)."""
        if partition is None:
            partition = partition_for(key, self.partitions[topic])
        return await self.outbox.send(topic, partition, key.encode(), value)

    async def send_changelog(
        self, topic: str, partition: int, records: list[tuple[bytes, bytes | None]]
    ) -> list[asyncio.Future[Any]]:
        """Queue a changelog partition's records; each ack settles with the last record it covers."""
        if self.settings.memory_broker:
            # Tansu takes one record a batch (infra/kafka.py), and a batch waits for the one before it.
            return [await self.outbox.send(topic, partition, key, value) for key, value in records]
        return await self.outbox.send_batch(topic, partition, records)

    async def append(self, topic: str, key: str, record: Any, partition: int | None = None) -> Ack:
        """Queue a record (a struct or a JSON-shaped value) on one of the service's topics."""
        return await self.send_raw(self.settings.topic(topic), key, msgspec.json.encode(record), partition)

    async def stop(self) -> None:
        await self.outbox.stop()
        if self.producer is not None:
            await self.producer.stop()
