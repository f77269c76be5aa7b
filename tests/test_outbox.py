"""The worker's outbox on the real broker: a fold queues without waiting, and each partition's records
land in the order they were queued."""

from __future__ import annotations

import asyncio
import uuid

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from infra.kafka import bootstrap, make_producer
from processors.output.appender import Outbox
from tests.service import RunningService
from tests.topics import read_topic

RECORDS = 400


async def test_records_keep_their_queue_order_per_partition_and_queueing_never_waits(
    service: RunningService,
) -> None:
    settings = service.settings
    topic = f"callscreen-test.outbox-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap(settings))
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
    finally:
        await admin.close()
    producer = make_producer(settings)
    await producer.start()

    async def get() -> AIOKafkaProducer:
        return producer

    outbox = Outbox(get)
    try:
        acks = [await outbox.send(topic, i % 2, b"key", str(i).encode()) for i in range(RECORDS)]
        # Queued, not sent: the loop has not run the senders yet.
        assert not any(ack.done() for ack in acks)
        metadata = await asyncio.gather(*acks)
    finally:
        await outbox.stop()
        await producer.stop()
    for partition in (0, 1):
        queued = [i for i in range(RECORDS) if i % 2 == partition]
        assert [metadata[i].offset for i in queued] == list(range(len(queued)))
    records = await read_topic(settings, topic)
    for partition in (0, 1):
        landed = [int(r.value) for r in sorted(records, key=lambda r: r.offset) if r.partition == partition]
        assert landed == [i for i in range(RECORDS) if i % 2 == partition]
