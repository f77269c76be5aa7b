"""The worker's appends (facts, alerts, ticks, replies on the topic, changelogs): a plain producer.

Faust's producer queues sends in a buffer flushed by a background task, which added milliseconds to
every answer; the worker sends directly instead, through an `Outbox` that keeps each partition's
records in order without holding up the fold. Every append returns the future of its ack.

The `Outbox` keeps appends in order without holding up the fold: one queue and one sender per partition.

On the embedded broker every record is a batch of its own, and aiokafka's send waits until the
previous batch of the same partition has left in a request: a broker round trip. A fold that awaited
each send was bound by those waits (most of its time while folding call ends). Here the fold queues
the record and goes on; each partition's sender hands its records to the producer in the order they
were queued, so a partition's records stay in order, and all partitions' records share the requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import msgspec
from aiokafka import AIOKafkaProducer

from infra.kafka import make_producer, partition_for
from infra.settings import Settings
from infra.topics import topic_specs

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


Entry = tuple[bytes, bytes | None, "asyncio.Future[Any]"]
# Records a partition may have queued before a fold waits: bounds memory when the broker falls behind.
QUEUE_LIMIT = 1000


class Outbox:
    def __init__(
        self, producer: Callable[[], Awaitable[AIOKafkaProducer]], limit: int = QUEUE_LIMIT, together: bool = True
    ) -> None:
        self._producer = producer
        self._limit = limit
        # Whether records queued together may leave in one batch (not on the embedded broker: one record a batch).
        self._together = together
        self._queues: dict[tuple[str, int], asyncio.Queue[Entry]] = {}
        self._senders: list[asyncio.Task[None]] = []

    async def send(self, topic: str, partition: int, key: bytes, value: bytes | None) -> asyncio.Future[Any]:
        """Queue a record (a None value deletes the key); returns the future of its ack (its metadata)."""
        queue = self._queues.get((topic, partition))
        if queue is None:
            queue = self._queues[(topic, partition)] = asyncio.Queue(self._limit)
            self._senders.append(asyncio.create_task(self._drain(topic, partition, queue)))
        ack: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        await queue.put((key, value, ack))
        return ack

    async def _drain(self, topic: str, partition: int, queue: asyncio.Queue[Entry]) -> None:
        producer = await self._producer()
        while True:
            entries = [await queue.get()]
            while self._together and not queue.empty():
                entries.append(queue.get_nowait())
            if len(entries) > 1:
                await self._send_together(producer, topic, partition, entries)
                continue
            key, value, ack = entries[0]
            try:
                delivery = await producer.send(topic, value, key=key, partition=partition)
            except Exception as exc:
                # Whoever waits for the ack sees the failure (a fold's event then stops the worker).
                ack.set_exception(exc)
                continue
            delivery.add_done_callback(functools.partial(_settle, ack))

    async def _send_together(
        self, producer: AIOKafkaProducer, topic: str, partition: int, entries: list[Entry]
    ) -> None:
        """Records queued while the partition's last send waited, in as few batches as hold them: in a
        backlog, about a hundred facts a batch instead of the producer's `send` for each
        (docs/decisions/0009-flushes-and-facts-in-batches.md)."""
        start = 0
        for batch, count in _batches(producer, [(key, value) for key, value, _ in entries]):
            await _submit_each(producer, batch, [ack for _, _, ack in entries[start : start + count]], topic, partition)
            start += count

    async def send_batch(
        self, topic: str, partition: int, records: list[tuple[bytes, bytes | None]]
    ) -> list[asyncio.Future[Any]]:
        """Queue records for a partition nothing else sends to, as few batches as hold them.

        Each returned ack settles with its batch's last record's metadata. A record sent on its own cost
        a future, a queue hop and the producer's per-record bookkeeping; a changelog flush sends
        thousands at once (docs/decisions/0009-flushes-and-facts-in-batches.md).
        """
        producer = await self._producer()
        return [await _submit(producer, batch, count, topic, partition) for batch, count in _batches(producer, records)]

    async def stop(self) -> None:
        """Stop the senders; records still queued are never acknowledged, so their events refold."""
        for task in self._senders:
            task.cancel()
        for task in self._senders:
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _batches(producer: AIOKafkaProducer, records: list[tuple[bytes, bytes | None]]) -> Iterator[tuple[Any, int]]:
    """The records in order, in as few of the producer's batches as hold them, each with its count."""
    batch, count = producer.create_batch(), 0
    for key, value in records:
        if batch.append(key=key, value=value, timestamp=None) is None:
            yield batch, count
            batch, count = producer.create_batch(), 0
            # A batch's first record always fits, whatever its size.
            batch.append(key=key, value=value, timestamp=None)
        count += 1
    if count:
        yield batch, count


def _settle(ack: asyncio.Future[Any], delivery: asyncio.Future[Any]) -> None:
    if ack.done():
        return
    if delivery.cancelled():
        ack.cancel()
    elif (error := delivery.exception()) is not None:
        ack.set_exception(error)
    else:
        ack.set_result(delivery.result())


async def _submit(
    producer: AIOKafkaProducer, batch: Any, count: int, topic: str, partition: int
) -> asyncio.Future[Any]:
    """The batch sent, and one ack for it that names its last record's offset."""
    ack: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    await _send_batch(producer, batch, topic, partition, [ack], functools.partial(_settle_batch, ack, count))
    return ack


async def _submit_each(
    producer: AIOKafkaProducer, batch: Any, acks: list[asyncio.Future[Any]], topic: str, partition: int
) -> None:
    """The batch sent, each of its records' `acks` settled with that record's own offset."""
    await _send_batch(producer, batch, topic, partition, acks, functools.partial(_settle_each, acks))


async def _send_batch(
    producer: AIOKafkaProducer,
    batch: Any,
    topic: str,
    partition: int,
    acks: list[asyncio.Future[Any]],
    settle: Callable[[asyncio.Future[Any]], None],
) -> None:
    """Hand the batch to the producer; `settle` runs on its delivery, and a refusal fails every ack."""
    try:
        delivery = await producer.send_batch(batch, topic, partition=partition)
    except Exception as exc:
        for ack in acks:
            ack.set_exception(exc)
        return
    delivery.add_done_callback(settle)


def _settle_each(acks: list[asyncio.Future[Any]], delivery: asyncio.Future[Any]) -> None:
    """Each record's ack names its own offset: the batch's metadata names its first record's."""
    if delivery.cancelled() or delivery.exception() is not None:
        for ack in acks:
            _settle(ack, delivery)
        return
    first = delivery.result()
    for index, ack in enumerate(acks):
        if not ack.done():
            ack.set_result(first._replace(offset=first.offset + index))


def _settle_batch(ack: asyncio.Future[Any], count: int, delivery: asyncio.Future[Any]) -> None:
    """The batch's metadata names its first record's offset; the ack names its last one's."""
    if delivery.cancelled() or delivery.exception() is not None:
        _settle(ack, delivery)
    elif not ack.done():
        first = delivery.result()
        ack.set_result(first._replace(offset=first.offset + count - 1))
