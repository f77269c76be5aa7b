"""Kafka client factories: one place that knows about the embedded broker's batch fault."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError
from aiokafka.partitioner import murmur2

from callscreen.settings import Settings
from callscreen.topics import topic_specs

# Tansu 0.6.0 reports wrong end offsets for multi-record batches (architecture.md): with a
# batch size this small every batch holds exactly one record. Only for the embedded broker.
SINGLE_RECORD_BATCH_BYTES = 64


def bootstrap(settings: Settings) -> str:
    """The host:port list aiokafka wants, from `kafka://host:port[,host:port]`."""
    url = settings.broker
    return url.split("://", 1)[1] if "://" in url else url


def partition_for(key: str, partitions: int) -> int:
    """Kafka's default partitioner (murmur2), so explicit and keyed sends agree."""
    return int(murmur2(key.encode()) & 0x7FFFFFFF) % partitions


def producer_batch_bytes(settings: Settings) -> int | None:
    return SINGLE_RECORD_BATCH_BYTES if settings.embedded_broker else None


def make_producer(settings: Settings, **extra: Any) -> AIOKafkaProducer:
    kwargs: dict[str, Any] = {
        "bootstrap_servers": bootstrap(settings),
        "acks": "all",
        "linger_ms": 0,
        "enable_idempotence": False,
    }
    batch = producer_batch_bytes(settings)
    if batch is not None:
        kwargs["max_batch_size"] = batch
    kwargs.update(extra)
    return AIOKafkaProducer(**kwargs)


def make_consumer(settings: Settings, **extra: Any) -> AIOKafkaConsumer:
    """A group-less consumer: callers `assign()` partitions themselves (no slow group joins)."""
    kwargs: dict[str, Any] = {
        "bootstrap_servers": bootstrap(settings),
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "fetch_max_wait_ms": settings.fetch_max_wait_ms,
    }
    kwargs.update(extra)
    return AIOKafkaConsumer(**kwargs)


async def ensure_topics(settings: Settings, attempts: int = 50) -> None:
    """Create every topic the service needs; existing ones are left as they are."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap(settings))
    for attempt in range(attempts):
        try:
            await admin.start()
            break
        except Exception:
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(0.1)
    try:
        existing = set(await admin.list_topics())
        wanted = [
            NewTopic(
                name=spec.name,
                num_partitions=spec.partitions,
                replication_factor=1,
                topic_configs={"cleanup.policy": "compact"} if spec.compacted else {},
            )
            for spec in topic_specs(settings)
            if spec.name not in existing
        ]
        if wanted:
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics(wanted)
    finally:
        await admin.close()


async def read_all(settings: Settings, topic: str) -> list[ConsumerRecord[bytes, bytes]]:
    """Every record in every partition of `topic`, from offset 0 to the end as of the call."""
    consumer = make_consumer(settings)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        if not partitions:
            return []
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        records: list[ConsumerRecord[bytes, bytes]] = []
        pending = {tp for tp in partitions if ends[tp] > 0}
        while pending:
            for tp, messages in (await consumer.getmany(*pending, timeout_ms=500)).items():
                records += messages
                if messages and messages[-1].offset + 1 >= ends[tp]:
                    pending.discard(tp)
        return records
    finally:
        await consumer.stop()
