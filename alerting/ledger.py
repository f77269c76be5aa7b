"""The deliveries topic as the alerting role's at-most-once ledger (schemas/deliveries.schema.json): the
records appended before and after each piece of work on an alert, and the alerts partitions the role may
append them for.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import msgspec
from aiokafka import AIOKafkaProducer, TopicPartition

from alerting.offsets import ReadOffsets
from domain.alerts import Alert
from domain.facts import AnyDelivery, ChannelAttempt, DeliveryAttempt
from domain.times import parse_ms
from infra.clock import now_ms
from infra.settings import Settings

_encoder = msgspec.json.Encoder()


@dataclass(frozen=True)
class Read:
    """An alert as read from the alerts topic: where, and its `created_at` in epoch milliseconds, the event
    time its records are remembered and counted by."""

    partition: TopicPartition
    offset: int
    alert: Alert
    created_ms: int


def event_time(record: AnyDelivery) -> int:
    """The event time a record read back is remembered by: its alert's `created_at` when it carries it
    (attempts do), else when it was written (`at`, never before its alert was made: it is kept as long,
    or longer)."""
    if isinstance(record, DeliveryAttempt | ChannelAttempt):
        created = parse_ms(record.created_at)
        if created is not None:
            return created
    return record.at


class Ledger:
    """Appends the role's records, and holds what they are checked against: the alerts partitions the
    role reads (work on an alert of one revoked meanwhile writes nothing) and the offsets read there, each
    held until the first record of every piece of work on its alert is acknowledged (alerting.offsets)."""

    def __init__(self, settings: Settings, producer: AIOKafkaProducer) -> None:
        self.topic = settings.topic("deliveries")
        self.producer = producer
        # The alerts partitions this instance reads, and the offsets read there not yet settled.
        self.owned: set[TopicPartition] = set()
        self.reading: ReadOffsets[TopicPartition] = ReadOffsets()
        # First records on their way to the broker; a revocation waits for them before it commits.
        self.writes: set[asyncio.Task[None]] = set()
        self.failure: BaseException | None = None

    def first(self, read: Read, record: AnyDelivery) -> asyncio.Task[None]:
        """Append the first record of one piece of the alert's work (its webhook delivery, or one message)."""
        task = asyncio.create_task(self.append(record))
        self.writes.add(task)

        def written(done: asyncio.Task[None]) -> None:
            self.writes.discard(done)
            if done.cancelled():
                return
            if (error := done.exception()) is not None:
                # At most once needs the record before anything else happens to the alert: stop the role.
                self.failure = self.failure or error
                return
            self.reading.settle(read.partition, read.offset)

        task.add_done_callback(written)
        return task

    async def append(self, record: AnyDelivery) -> None:
        """Append `record`, stamped with when it is written, and wait for the broker's ack."""
        stamped = msgspec.structs.replace(record, at=now_ms())
        await self.producer.send_and_wait(self.topic, _encoder.encode(stamped), key=record.alert_id.encode())
