"""Reading topics back with a plain Kafka client, as an analyst or an auditor would."""

from __future__ import annotations

from aiokafka import ConsumerRecord, TopicPartition

from callscreen.kafka import make_consumer
from callscreen.settings import Settings


async def read_topic(settings: Settings, topic: str) -> list[ConsumerRecord[bytes, bytes]]:
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
