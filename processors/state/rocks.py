"""RocksDB in a worker: one memory budget for every database it opens, and the feature view's store.

A worker opens a database per table partition (six tables times the partitions it holds) and one
for the feature view. With Faust's defaults each database gets its own 2 GiB block cache and up to
three 64 MB memtables, so a worker's memory grew with its tables and with the partition count
(`docs/architecture.md` has the measurement). Here every database shares one LRU block cache, and a
write-buffer manager charges the memtables to the same cache and has them flushed once they pass half of
it. RocksDB's memory then stays near the budget whatever the tables hold: near, not under, since neither
the cache nor the manager stalls writers to enforce it (the cache was seen up to half over its capacity).

Index and filter blocks stay outside the cache, in each table file's reader, where they cost memory that
grows with the keys held (the bloom filter's 10 bits a key, and one index entry a data block). In the
cache, data blocks evicted them once the store outgrew it, and a read of an absent key (most of what a
start's score reads: a new caller has no history, window or block) read them from disk again: the
worker's CPU a record grew with each round of calls (docs/decisions/0019-rocksdb-filters-outside-the-cache.md).

The feature view's store (`RocksStore`): JSON values under string keys, within the worker's budget.

It keeps the `domain.store.Store` contract (tests/unit/test_store.py runs it on both stores). A put is
kept in memory, where gets see it, until `write_pending` writes every put since the last one in a
single write batch: a start's fact puts about ten keys, and each put of its own was a write to
RocksDB's write-ahead log (docs/decisions/0012-state-written-behind-without-the-log.md). The worker
calls `write_pending` in each changelog flush, before it acknowledges the events the flush covers, so
a committed offset never runs ahead of the view; the mirror's positions reach RocksDB in the same
batch as the facts they cover. After a crash the mirror reads the log up to its end before any event
is folded (`processors/state/mirror.py`), so a fact the flush had not written but the log holds is back.

Its writes skip RocksDB's write-ahead log, as the tables' do (`unlogged`, above): what RocksDB holds on
disk is always a whole memtable flush, the mirror's positions with the facts they cover, so a crash leaves
an earlier view that the mirror brings up to date from the log. A clean stop writes it to disk (`persist`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec
from faust.stores.rocksdb import RocksDBOptions
from rocksdict import (
    BlockBasedOptions,
    Cache,
    Env,
    Options,
    Rdict,
    ReadOptions,
    WriteBatch,
    WriteBufferManager,
    WriteOptions,
)

from processors.state.row_cache import RowMismatch, same

MB = 1024 * 1024
# A memtable is flushed at this size even when the budget has room: keeps each flush short.
MEMTABLE_BYTES = 4 * MB
BLOOM_BITS_PER_KEY = 10
# RocksDB keeps every table file open by default; a worker holds 6 x partitions + 1 databases.
MAX_OPEN_FILES = 256


class RocksBudget:
    """The shared cache and write-buffer manager; `options()` opens a database within them."""

    def __init__(self, megabytes: int) -> None:
        self.cache = Cache(megabytes * MB)
        self.write_buffers = WriteBufferManager.new_write_buffer_manager_with_cache(
            megabytes * MB // 2, False, self.cache
        )
        # Compactions run at the lowest CPU priority: on two cores they took a core's slice from the
        # folds and answers when the service was busiest (docs/decisions/0026-compactions-at-low-priority.md).
        # Flushes keep theirs: a write waits for one when both memtables are full.
        self.env = Env()
        self.env.lower_thread_pool_cpu_priority()

    def options(self) -> Options:
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        options.set_env(self.env)
        options.set_max_open_files(MAX_OPEN_FILES)
        options.set_write_buffer_size(MEMTABLE_BYTES)
        options.set_max_write_buffer_number(2)
        options.set_write_buffer_manager(self.write_buffers)
        table = BlockBasedOptions()
        table.set_block_cache(self.cache)
        table.set_cache_index_and_filter_blocks(False)
        table.set_bloom_filter(BLOOM_BITS_PER_KEY, True)
        options.set_block_based_table_factory(table)
        return options

    def open(self, path: Path) -> Rdict:
        options = self.options()
        # Named, or rocksdict opens an existing database's column family with its own table options:
        # a block cache of 8 MB for each database and no bloom filter. Every restart lost the shared
        # budget and the filters (docs/decisions/0019-rocksdb-filters-outside-the-cache.md).
        return Rdict(str(path), options=options, column_families={"default": options})


def unlogged(db: Rdict) -> Rdict:
    """`db`, its writes from now on without RocksDB's write-ahead log."""
    options = WriteOptions()
    # A property at run time; rocksdict's type stub declares it a method.
    options.disable_wal = True  # type: ignore[method-assign,assignment]
    db.set_write_options(options)
    return db


def persist(db: Rdict) -> None:
    """Write the database's memtables to disk: what a write without RocksDB's log keeps past a stop."""
    db.flush(wait=True)


def persist_all(databases: Iterable[Rdict]) -> None:
    """`persist` each; RocksDB takes a flush from any thread, beside the writes of the loop's."""
    for db in databases:
        persist(db)


def write_rows(db: Rdict, rows: Iterable[tuple[bytes, bytes | None]]) -> None:
    """Puts, and a delete for each None value, in one write batch: after a crash, all of them or none."""
    batch = WriteBatch(raw_mode=True)
    for key, raw in rows:
        if raw is None:
            batch.delete(key)
        else:
            batch.put(key, raw)
    db.write(batch)


class BudgetedFaustOptions(RocksDBOptions):
    """Faust's RocksDB options with every table database opened within one `RocksBudget`."""

    def __init__(self, budget: RocksBudget) -> None:
        super().__init__(use_rocksdict=True)
        self.budget = budget

    def as_options(self) -> Any:
        return self.budget.options()

    def open(self, path: Path, *, read_only: bool = False) -> Rdict:
        """As Faust opens a table's database, but through `RocksBudget.open`: Faust names no column family.

        Its writes skip RocksDB's write-ahead log, which cost more than the write itself: 10–14 µs for a
        6 KB row against 2.4–3.4 µs without (docs/decisions/0012-state-written-behind-without-the-log.md).
        A table needs no log: it takes rows only once their changelog holds them
        (processors/state/write_behind.py), and what RocksDB has on disk is always a whole flush of its memtable,
        the offset Faust stores after the rows included, so a table that lost its memtable is recovered from
        its changelog from that offset: after a crash, only what the memtables held. A clean stop writes
        the memtables to disk (`persist`), as RocksDB does when it closes a database, so the next start has
        nothing to recover.
        The feature view writes without it too (`RocksStore`)."""
        db = self.budget.open(path)
        db.set_read_options(ReadOptions())
        return unlogged(db)


# Values read or put kept decoded, in two generations of at most this many each: a full generation becomes
# the older one and the older one is forgotten, so a value read again since is kept across the turn.
READ_KEPT = 16384
# What a put of a value of these types keeps is the value itself: JSON gives it back as it is.
_PLAIN = (dict, list, str, int, float, bool)
_UNREAD = object()


class RocksStore:
    def __init__(self, path: Path, budget: RocksBudget, check: bool = False) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.db = unlogged(budget.open(path))
        self.check = check
        # Each key put or deleted (None) since the last `write_pending`, with its last value.
        self._pending: dict[bytes, bytes | None] = {}
        # A start reads its features, then its own fact is applied to the same keys, and the call's end and
        # the account's next start read what it put: most reads are of a value read or put before, absent
        # keys included (docs/decisions/0021-view-keeps-what-it-read-and-put.md). A value kept is the store's own:
        # the view changes one only to put it back. A struct put is forgotten: a get gives builtins.
        # An account's numbers and day count, read by each of its starts, were forgotten with everything else
        # every 2,000 calls or so, and read and decoded again (docs/decisions/0021-view-keeps-what-it-read-and-put.md).
        self._read: dict[str, Any] = {}
        self._older: dict[str, Any] = {}

    def get(self, key: str) -> Any:
        found = self._read.get(key, _UNREAD)
        if found is not _UNREAD:
            return found
        found = self._older.get(key, _UNREAD)
        if found is not _UNREAD:
            self._keep(key, found)
            return found
        raw_key = key.encode()
        pending = self._pending
        raw = pending[raw_key] if raw_key in pending else self.db.get(raw_key)
        value = None if raw is None else msgspec.json.decode(raw)
        self._keep(key, value)
        return value

    def put(self, key: str, value: Any) -> None:
        raw = msgspec.json.encode(value)
        self._pending[key.encode()] = raw
        if type(value) not in _PLAIN:
            self._read.pop(key, None)
            self._older.pop(key, None)
            return
        if self.check and not same(value, decoded := msgspec.json.decode(raw)):
            raise RowMismatch(f"view value {key} put as {value!r}, read back as {decoded!r}")
        self._keep(key, value)

    def delete(self, key: str) -> None:
        self._pending[key.encode()] = None
        self._keep(key, None)

    def _keep(self, key: str, value: Any) -> None:
        if len(self._read) >= READ_KEPT:
            self._older, self._read = self._read, {}
        self._read[key] = value

    def write_pending(self) -> None:
        """Write every put and delete since the last call to RocksDB, in one batch."""
        if self._pending:
            write_rows(self.db, self._pending.items())
            self._pending = {}

    def persist(self) -> None:
        """Every put so far on disk: a clean stop's, as RocksDB writes the view without its log."""
        self.write_pending()
        persist(self.db)

    def close(self) -> None:
        self.write_pending()
        self.db.close()
