"""A Faust table read and written straight in its partition's RocksDB, its changelog written behind.

Stock Faust sends one changelog record per table write. A call's record is rewritten by every
turn event, and on the embedded broker each record is a produce of its own, so the changelog was
most of a worker's cost. Here a write marks the key dirty and is kept in memory, where reads see
it, decoded (`processors/row_cache.py`); `flush_changelog` writes the dirty keys' last values to
RocksDB, one write batch per partition, and sends them to the changelog. The runtime acknowledges an
event only once a flush that covers its writes is acknowledged, so a committed offset never runs
ahead of RocksDB or the changelog; a crash refolds the uncommitted events, and every fold is
idempotent.

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
import operator
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any, cast

import faust
import msgspec
from faust.stores.rocksdb import Store as RocksDBStore
from faust.streams import current_event
from rocksdict import Rdict

from processors.rocks import persist, write_rows
from processors.row_cache import RowCache, fits

# Queues a partition's changelog records (topic, partition, [(key, value or None to delete)]); returns their acks.
SendBatch = Callable[[str, int, list[tuple[bytes, bytes | None]]], Awaitable[list["asyncio.Future[Any]"]]]


class WriteBehindTable(faust.Table[bytes, bytes]):
    """Bytes keys and values in the current event's partition; RocksDB and changelog writes coalesced per key."""

    def __init__(self, *args: Any, rows: RowCache, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._rows = rows
        # Written since the last flush: what the changelog has still to take, and RocksDB unless
        # `put_pending` ran since.
        self._dirty: dict[tuple[int, bytes], bytes | None] = {}
        # Whether RocksDB holds every dirty row already: a timer reads row after row, each through `put_pending`.
        self._pending_put = True
        # How many times a rebalance or a recovery changed rows under the folds: what a caller derived
        # from rows read before is stale once it moves.
        self.resets = 0

    def decoded(self, key: bytes, kind: Any) -> Any:
        """The row under `key` decoded as `kind`, or None."""
        event = current_event()
        if event is None:
            # A timer's read: Faust's store looks through every partition it holds.
            self.put_pending()
            found: bytes | None = self.data.get(key)
            return None if found is None else msgspec.json.decode(found, type=kind)
        partition = event.message.partition
        slot = (self.name, partition, key)
        kept = self._rows.row(slot)
        if kept is None:
            raw = self._stored(partition, key)
            if raw is None:
                return None
        else:
            raw, struct = kept
            if fits(struct, kind):
                return struct
        value = msgspec.json.decode(raw, type=kind)
        if kept is None or isinstance(value, msgspec.Struct):
            self._rows.put(slot, raw, value)
        return value

    def write(self, key: bytes, raw: bytes | None, value: Any = None) -> None:
        """Sets `key` to `raw`, encoded from `value` (None deletes it), in the current event's partition."""
        event = current_event()
        # The runtime's tables never use the producer's partitioner: a key lives in its event's partition.
        assert event is not None, "a table is written only while folding an event"
        partition = event.message.partition
        slot = (self.name, partition, key)
        dirty = (partition, key)
        if raw is not None:
            self._rows.put(slot, raw, value)
        elif self._stored(partition, key) is None:
            # Nothing to delete, so no tombstone for the changelog either.
            return
        else:
            self._rows.drop(slot)
            if dirty in self._dirty and self._partition_db(partition).get(key) is None:
                # Put since the last flush and not in RocksDB, so in no changelog record either: a key put
                # and deleted between two flushes (a call's sweep entry, when a backlog holds the call's
                # start and end) costs neither a RocksDB write nor a tombstone.
                del self._dirty[dirty]
                return
        self._dirty[dirty] = raw
        self._pending_put = False

    def scan(self, low: bytes, high: bytes, backwards: bool = False) -> Iterator[tuple[bytes, bytes]]:
        """The rows of the current event's partition with low <= key < high, in key order (or the reverse),
        those written since the last flush included; read from RocksDB as the caller goes (the first row
        costs one seek)."""
        event = current_event()
        assert event is not None, "a table is scanned only while folding an event"
        partition = event.message.partition
        # What was written since the last flush, deletions included, is not in RocksDB yet (`put_pending`
        # would write every row again, the scan's range or not): laid over what RocksDB holds.
        written = sorted(
            ((key, raw) for (p, key), raw in self._dirty.items() if p == partition and low <= key < high),
            reverse=backwards,
        )
        # The databases are opened in raw mode: their keys and values are bytes. Backwards, the first key
        # is the last one not above `high`.
        stored = self._partition_db(partition).items(backwards=backwards, from_key=high if backwards else low)
        return overlaid(cast(Iterator[tuple[bytes, bytes]], stored), written, low, high, backwards)

    def _stored(self, partition: int, key: bytes) -> bytes | None:
        if (partition, key) in self._dirty:
            return self._dirty[(partition, key)]
        value: bytes | None = self._partition_db(partition).get(key)
        return value

    def put_pending(self) -> None:
        """Write what was written since the last flush to RocksDB: one write batch per partition.

        Nothing when RocksDB holds it all already (a timer reads row after row through here); with rows
        written since, it writes them all again."""
        if not self._pending_put:
            self._put(self._dirty_by_partition())
            self._pending_put = True

    def _dirty_by_partition(self) -> dict[int, list[tuple[bytes, bytes | None]]]:
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for (partition, key), raw in self._dirty.items():
            by_partition.setdefault(partition, []).append((key, raw))
        return by_partition

    def _put(self, by_partition: dict[int, list[tuple[bytes, bytes | None]]]) -> None:
        for partition, rows in by_partition.items():
            write_rows(self._partition_db(partition), rows)

    def persist(self) -> None:
        """Every row written so far on disk, in each partition's database this worker has open."""
        self.put_pending()
        store = self.data
        assert isinstance(store, RocksDBStore)
        for db in store._dbs.values():
            persist(db)

    def written_items(self) -> Any:
        """Every row this worker holds, what was written since the last flush included."""
        self.put_pending()
        return self.items()

    async def on_rebalance(
        self, assigned: set[Any], revoked: set[Any], newly_assigned: set[Any], generation_id: int = 0
    ) -> None:
        # Into the databases while this worker still has them open; what is kept may be another worker's next.
        self.put_pending()
        self._rows.drop_table(self.name)
        self.resets += 1
        await super().on_rebalance(assigned, revoked, newly_assigned, generation_id)

    def apply_changelog_batch(self, batch: Iterable[Any]) -> None:
        """Recovery writes rows straight into RocksDB: a row kept from before is no longer the row."""
        batch = list(batch)
        for record in batch:
            self._rows.drop((self.name, record.message.partition, record.message.key))
        super().apply_changelog_batch(batch)
        self.resets += 1
        # It may have written an older value over a dirty row: the next `put_pending` writes them again.
        self._pending_put = False

    def _partition_db(self, partition: int) -> Rdict:
        # Faust opens a partition's database on first use and drops it when the partition is revoked.
        store = self.data
        assert isinstance(store, RocksDBStore)
        db: Rdict = store._db_for_partition(partition)
        return db

    async def flush_changelog(self, send_batch: SendBatch) -> list[asyncio.Future[Any]]:
        """Write the dirty keys to RocksDB and queue their last values on the changelog; the acks to wait for."""
        by_partition = self._dirty_by_partition()
        self._put(by_partition)
        self._dirty = {}
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


def overlaid(
    stored: Iterator[tuple[bytes, bytes]],
    written: list[tuple[bytes, bytes | None]],
    low: bytes,
    high: bytes,
    backwards: bool = False,
) -> Iterator[tuple[bytes, bytes]]:
    """The `stored` rows with low <= key < high and the `written` ones laid over them (None deletes), all in
    key order or all in its reverse. `stored` starts at the range's first row in that order, or at `high`."""
    goes_first = operator.gt if backwards else operator.lt
    pending = iter(written)
    over = next(pending, None)
    for key, value in stored:
        if not low <= key < high:
            if backwards and key >= high:
                continue
            break
        while over is not None and goes_first(over[0], key):
            if over[1] is not None:
                yield over[0], over[1]
            over = next(pending, None)
        row: bytes | None = value
        if over is not None and over[0] == key:
            row, over = over[1], next(pending, None)
        if row is not None:
            yield key, row
    while over is not None:
        if over[1] is not None:
            yield over[0], over[1]
        over = next(pending, None)
