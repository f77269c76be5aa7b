"""A Faust table read and written straight in its partition's RocksDB, its changelog written behind.

Stock Faust sends one changelog record per table write. A call's record is rewritten by every
turn event, and on the embedded broker each record is a produce of its own, so the changelog was
most of a worker's cost. Here a write marks the key dirty and is kept in memory, where reads see
it, decoded (`processors/state/row_cache.py`); `flush_changelog` sends the dirty keys' last values to the
changelog, and RocksDB takes them, one write batch per partition with the changelog offset they reach,
only once the broker has acknowledged them. The runtime acknowledges an event only once a flush that
covers its writes is acknowledged, so a committed offset never runs ahead of RocksDB or the changelog.

RocksDB is never ahead of the changelog, so a kill loses nothing the changelog lacks: the next start
keeps the tables and recovers each partition from the offset stored with its rows, the changelog's short
tail since RocksDB's last memtable flush, not the whole table; the uncommitted events are refolded, and
every fold is idempotent. (When RocksDB took rows before their changelog, a refold found its own rows and
wrote nothing, and the partition's next owner recovered it without them: every unclean start had to drop
the tables and restore them whole: docs/architecture.md, "Crash recovery".)

Reads and writes go to the database of the current event's partition, as Faust's own store does, but
without the layers around it: its mapping, serializer registry, key-to-partition index and sensors
cost more per call than RocksDB's own get or put (docs/decisions/0007-tables-read-rocksdb-directly.md).
Faust keeps what the table is for: its changelog topic, its partitions' databases through
rebalances, and their recovery.

The flush queues its records on the worker's outbox (`processors/output/appender.py`), not Faust's producer:
Faust holds the stream back while its send buffer is full, and a flush that awaited Faust's `send`
key after key waited a broker round trip whenever a key's partition still had a record pending, so
a flush of a thousand keys took seconds while folded events (and their memory) piled up behind it.
"""

from __future__ import annotations

import asyncio
import functools
import operator
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any, cast

import faust
import msgspec
from faust.stores.rocksdb import Store as RocksDBStore
from faust.streams import current_event
from faust.types import TP
from rocksdict import Rdict

from processors.state.rocks import persist, write_rows
from processors.state.row_cache import RowCache, fits

# Queues a partition's changelog records (topic, partition, [(key, value or None to delete)]); returns their acks.
# A row not yet in RocksDB: its value, or (None,) for a deletion.
Unflushed = tuple[bytes | None]
SendBatch = Callable[[str, int, list[tuple[bytes, bytes | None]]], Awaitable[list["asyncio.Future[Any]"]]]


class WriteBehindTable(faust.Table[bytes, bytes]):
    """Bytes keys and values in the current event's partition; RocksDB and changelog writes coalesced per key."""

    def __init__(self, *args: Any, rows: RowCache, recovered: Callable[[int], None], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._rows = rows
        self._recovered = recovered
        # Written since the last flush: what the changelog has still to take.
        self._dirty: dict[tuple[int, bytes], bytes | None] = {}
        # Sent to the changelog, not yet acknowledged, so not in RocksDB: each row with the flush that sent it.
        self._in_flight: dict[tuple[int, bytes], tuple[int, bytes | None]] = {}
        self._flushes = 0
        # Each revoked partition's last flush before it went: an acknowledgement of one of those comes after
        # the partition may be back here, recovered from a changelog that has newer rows.
        self._flushes_before_revoke: dict[int, int] = {}
        # How many times a rebalance or a recovery changed rows under the folds: what a caller derived
        # from rows read before is stale once it moves.
        self.resets = 0

    def decoded(self, key: bytes, kind: Any) -> Any:
        """The row under `key` decoded as `kind`, or None."""
        event = current_event()
        if event is None:
            # A timer's read: Faust's store looks through every partition it holds.
            pending = self._unflushed_in_any(key)
            found: bytes | None = self.data.get(key) if pending is None else pending[0]
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
            if dirty in self._dirty and dirty not in self._in_flight and self._partition_db(partition).get(key) is None:
                # Put since the last flush and in no changelog record: a key put and deleted between two
                # flushes (a call's sweep entry, when a backlog holds the call's start and end) costs neither a
                # RocksDB write nor a tombstone.
                del self._dirty[dirty]
                return
        self._dirty[dirty] = raw

    def scan(self, low: bytes, high: bytes, backwards: bool = False) -> Iterator[tuple[bytes, bytes]]:
        """The rows of the current event's partition with low <= key < high, in key order (or the reverse),
        those written since the last flush included; read from RocksDB as the caller goes (the first row
        costs one seek)."""
        event = current_event()
        assert event is not None, "a table is scanned only while folding an event"
        partition = event.message.partition
        # What was written since the last acknowledged flush, deletions included, is not in RocksDB yet:
        # laid over what RocksDB holds.
        unflushed = {key: raw for (p, key), (_, raw) in self._in_flight.items() if p == partition and low <= key < high}
        unflushed.update((key, raw) for (p, key), raw in self._dirty.items() if p == partition and low <= key < high)
        written = sorted(unflushed.items(), reverse=backwards)
        # The databases are opened in raw mode: their keys and values are bytes. Backwards, the first key
        # is the last one not above `high`.
        stored = self._partition_db(partition).items(backwards=backwards, from_key=high if backwards else low)
        return overlaid(cast(Iterator[tuple[bytes, bytes]], stored), written, low, high, backwards)

    def _stored(self, partition: int, key: bytes) -> bytes | None:
        pending = self._unflushed(partition, key)
        if pending is not None:
            return pending[0]
        value: bytes | None = self._partition_db(partition).get(key)
        return value

    def _unflushed(self, partition: int, key: bytes) -> Unflushed | None:
        """The row as written since the last acknowledged flush, or None when RocksDB has its latest."""
        slot = (partition, key)
        if slot in self._dirty:
            return (self._dirty[slot],)
        if slot in self._in_flight:
            return (self._in_flight[slot][1],)
        return None

    def _unflushed_in_any(self, key: bytes) -> Unflushed | None:
        for partition in list(self._rocks()._dbs):
            pending = self._unflushed(partition, key)
            if pending is not None:
                return pending
        return None

    def _dirty_by_partition(self) -> dict[int, list[tuple[bytes, bytes | None]]]:
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for (partition, key), raw in self._dirty.items():
            by_partition.setdefault(partition, []).append((key, raw))
        return by_partition

    def databases(self) -> list[Rdict]:
        """The partition databases this worker has open."""
        return list(self._rocks()._dbs.values())

    def persist(self) -> None:
        """RocksDB's memtables on disk, in each partition's database this worker has open: every row the
        changelog acknowledged. What is still unacknowledged is left out, as it is of the changelog."""
        for db in self._rocks()._dbs.values():
            persist(db)

    def written_items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every row of the partitions this worker folds, what was written since the last flush included."""
        store = self._rocks()
        actives = self.app.assignor.assigned_actives()
        for partition, db in list(store._dbs.items()):
            if TP(self.changelog_topic_name, partition) not in actives:
                continue
            unflushed = {key: raw for (p, key), (_, raw) in self._in_flight.items() if p == partition}
            unflushed.update((key, raw) for (p, key), raw in self._dirty.items() if p == partition)
            for key, raw in db.items():
                if key != store.offset_key and key not in unflushed:
                    yield key, raw
            yield from ((key, raw) for key, raw in unflushed.items() if raw is not None)

    async def on_rebalance(
        self, assigned: set[Any], revoked: set[Any], newly_assigned: set[Any], generation_id: int = 0
    ) -> None:
        # A revoked partition's unacknowledged rows go with it: its next owner refolds the events they came
        # from, which were not acknowledged either, and a flush must not reopen its database.
        gone = {tp.partition for tp in revoked if tp.topic in self.changelog_topic.topics}
        self._flushes_before_revoke.update((partition, self._flushes) for partition in gone)
        self._dirty = {slot: raw for slot, raw in self._dirty.items() if slot[0] not in gone}
        self._in_flight = {slot: row for slot, row in self._in_flight.items() if slot[0] not in gone}
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
        self._recovered(len(batch))

    def _rocks(self) -> RocksDBStore:
        store = self.data
        assert isinstance(store, RocksDBStore)
        return store

    def _partition_db(self, partition: int) -> Rdict:
        # Faust opens a partition's database on first use and drops it when the partition is revoked.
        db: Rdict = self._rocks()._db_for_partition(partition)
        return db

    async def flush_changelog(self, send_batch: SendBatch) -> list[asyncio.Future[Any]]:
        """Queue the dirty keys' last values on the changelog, for RocksDB once acknowledged; the acks to wait for."""
        by_partition = self._dirty_by_partition()
        self._flushes += 1
        flush = self._flushes
        self._in_flight.update((slot, (flush, raw)) for slot, raw in self._dirty.items())
        self._dirty = {}
        acks = []
        for partition, records in by_partition.items():
            sent = await send_batch(self.changelog_topic_name, partition, records)
            # A partition's batches are acknowledged in order, so its last one covers them all and carries
            # the offset to store; storing each record's was a RocksDB write per record.
            sent[-1].add_done_callback(functools.partial(self._durable, partition, flush, records))
            acks += sent
        return acks

    def _durable(
        self, partition: int, flush: int, records: list[tuple[bytes, bytes | None]], ack: asyncio.Future[Any]
    ) -> None:
        """The changelog holds `records`: into RocksDB, then the offset Faust's recovery reads on from.

        A failed send leaves them in flight: the worker stops (processors/folds/commits.py) and refolds."""
        if ack.cancelled() or ack.exception() is not None:
            return
        for key, _ in records:
            if self._in_flight.get((partition, key), (0, None))[0] == flush:
                del self._in_flight[(partition, key)]
        store = self._rocks()
        db = store._dbs.get(partition)
        if db is None or flush <= self._flushes_before_revoke.get(partition, 0):
            # Revoked since: its next owner recovers these rows from the changelog.
            return
        write_rows(db, records)
        store.set_persisted_offset(ack.result().topic_partition, ack.result().offset)


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
