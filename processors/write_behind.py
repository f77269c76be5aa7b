"""A Faust table whose changelog gets each key's last value once per flush instead of every write.

Stock Faust sends one changelog record per table write. A call's record is rewritten by every
turn event, and on the embedded broker each record is a produce of its own, so the changelog was
most of a worker's cost. Here a write goes to RocksDB at once (reads see it) and marks the key
dirty; `flush_changelog` sends the dirty keys' last values. The runtime acknowledges an event only
once a flush that covers its writes is acknowledged, so a committed offset never runs ahead of the
changelog; a crash refolds the uncommitted events, and every fold is idempotent.

The flush queues its records on the worker's outbox (`processors/outbox.py`), not Faust's producer:
Faust holds the stream back while its send buffer is full, and a flush that awaited Faust's `send`
key after key waited a broker round trip whenever a key's partition still had a record pending, so
a flush of a thousand keys took seconds while folded events (and their memory) piled up behind it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import faust

# Queues one changelog record (topic, partition, key, value or None to delete); returns its ack.
Send = Callable[[str, int, bytes, bytes | None], Awaitable["asyncio.Future[Any]"]]


class WriteBehindTable(faust.Table[bytes, bytes]):
    """Changelog writes coalesced per key until `flush_changelog`; bytes keys and values only."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._dirty: dict[tuple[int, bytes], bytes | None] = {}

    def on_key_set(self, key: bytes, value: bytes) -> None:
        self._dirty[(self._partition(key), key)] = value
        self._sensor_on_set(self, key, value)

    def on_key_del(self, key: bytes) -> None:
        self._dirty[(self._partition(key), key)] = None
        self._sensor_on_del(self, key)

    def _partition(self, key: bytes) -> int:
        partition = self.partition_for_key(key)
        # The runtime's tables never use the producer's partitioner: a key lives in its event's partition.
        assert partition is not None
        return partition

    async def flush_changelog(self, send: Send) -> list[asyncio.Future[Any]]:
        """Queue the dirty keys' last values on the changelog; returns the acks to wait for."""
        dirty, self._dirty = self._dirty, {}
        topic = self.changelog_topic_name
        acks = []
        for (partition, key), value in dirty.items():
            ack = await send(topic, partition, key, value)
            ack.add_done_callback(self._persisted)
            acks.append(ack)
        return acks

    def _persisted(self, ack: asyncio.Future[Any]) -> None:
        """Faust's own bookkeeping: recovery reads a partition's changelog from the last offset stored here."""
        if not ack.cancelled() and ack.exception() is None:
            self.data.set_persisted_offset(ack.result().topic_partition, ack.result().offset)
