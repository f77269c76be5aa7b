"""A Faust table read and written straight in its partition's RocksDB, its changelog written behind.

Stock Faust sends one changelog record per table write. A call's record is rewritten by every
turn event, and on the embedded broker each record is a produce of its own, so the changelog was
most of a worker's cost. Here a write goes to RocksDB at once (reads see it) and marks the key
dirty; `flush_changelog` sends the dirty keys' last values. The runtime acknowledges an event only
once a flush that covers its writes is acknowledged, so a committed offset never runs ahead of the
changelog; a crash refolds the uncommitted events, and every fold is idempotent.

Reads and writes go to the database of the current event's partition, as Faust's own store does, but
without the layers around it: its mapping, serializer registry, key-to-partition index and sensors
cost more per call than RocksDB's own get or put (docs/profiles/README.md, "Table reads and writes").
Faust keeps what the table is for: its changelog topic, its partitions' databases through
rebalances, and their recovery.

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
from faust.stores.rocksdb import Store as RocksDBStore
from faust.streams import current_event
from rocksdict import Rdict

# Queues a partition's changelog records (topic, partition, [(key, value or None to delete)]); returns their acks.
SendBatch = Callable[[str, int, list[tuple[bytes, bytes | None]]], Awaitable[list["asyncio.Future[Any]"]]]


class WriteBehindTable(faust.Table[bytes, bytes]):
    """Bytes keys and values in the current event's partition; changelog writes coalesced per key."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._dirty: dict[tuple[int, bytes], bytes | None] = {}

    def read(self, key: bytes) -> bytes | None:
        event = current_event()
        if event is None:
            # A timer's read: Faust's store looks through every partition it holds.
            found: bytes | None = self.data.get(key)
            return found
        value: bytes | None = self._partition_db(event.message.partition).get(key)
        return value

    def write(self, key: bytes, value: bytes | None) -> None:
        """Sets `key` (None deletes it) in the current event's partition, which is also its changelog's."""
        event = current_event()
        # The runtime's tables never use the producer's partitioner: a key lives in its event's partition.
        assert event is not None, "a table is written only while folding an event"
        partition = event.message.partition
        db = self._partition_db(partition)
        if value is not None:
            db.put(key, value)
        elif db.get(key) is not None:
            db.delete(key)
        else:
            # Nothing to delete, so no tombstone for the changelog either.
            return
        self._dirty[(partition, key)] = value

    def _partition_db(self, partition: int) -> Rdict:
        # Faust opens a partition's database on first use and drops it when the partition is revoked.
        store = self.data
        assert isinstance(store, RocksDBStore)
        db: Rdict = store._db_for_partition(partition)
        return db

    async def flush_changelog(self, send_batch: SendBatch) -> list[asyncio.Future[Any]]:
        """Queue the dirty keys' last values on the changelog; returns the acks to wait for."""
        dirty, self._dirty = self._dirty, {}
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for (partition, key), value in dirty.items():
            by_partition.setdefault(partition, []).append((key, value))
        acks = []
        for partition, records in by_partition.items():
            sent = await send_batch(self.changelog_topic_name, partition, records)
            # A partition's batches are acknowledged in order, so its last one carries the offset to store;
            # storing each record's was a RocksDB write per record.
            sent[-1].add_done_callback(self._persisted)
            acks += sent
        return acks

    def _persisted(self, ack: asyncio.Future[Any]) -> None:
        """Faust's own bookkeeping: recovery reads a partition's changelog from the last offset stored here."""
        if not ack.cancelled() and ack.exception() is None:
            self.data.set_persisted_offset(ack.result().topic_partition, ack.result().offset)
