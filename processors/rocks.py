"""One memory budget for every RocksDB database a worker opens.

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
worker's CPU a record grew with each round of calls (docs/profiles/README.md, "Filters outside the cache").
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

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
        # folds and answers when the service was busiest (docs/profiles/README.md, "Compactions at low
        # priority"). Flushes keep theirs: a write waits for one when both memtables are full.
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
        # budget and the filters (docs/profiles/README.md, "Options lost on a restart").
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
        6 KB row against 2.4–3.4 µs without (docs/profiles/README.md, "Table writes without RocksDB's
        log"). A table needs no log: it takes rows only once their changelog holds them
        (processors/write_behind.py), and what RocksDB has on disk is always a whole flush of its memtable,
        the offset Faust stores after the rows included, so a table that lost its memtable is recovered from
        its changelog from that offset: after a crash, only what the memtables held. A clean stop writes
        the memtables to disk (`persist`), as RocksDB does when it closes a database, so the next start has
        nothing to recover.
        The feature view writes without it too (`processors/rocks_store.py`)."""
        db = self.budget.open(path)
        db.set_read_options(ReadOptions())
        return unlogged(db)
