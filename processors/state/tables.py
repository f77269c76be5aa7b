"""A worker's Faust tables: RocksDB within the worker's memory budget, changelogs written behind.

Values are msgspec JSON; each read names the type it expects, so a table's rows are typed structs
(`domain.calls.CallState`, `domain.detectors.NumberWindow`, …) and never loose dicts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import faust
import msgspec
from faust.stores.rocksdb import Store as RocksDBStore

from domain import horizon, index
from processors.state.rocks import BudgetedFaustOptions, RocksBudget
from processors.state.row_cache import RowCache
from processors.state.write_behind import SendBatch, WriteBehindTable


class ValueTooLarge(Exception):
    """A fold produced a row over the bound (`Settings.max_value_bytes`)."""


class Tables:
    def __init__(
        self,
        app: faust.App,
        partitions: int,
        rocks: RocksBudget,
        max_value_bytes: int,
        rows: RowCache,
        recovered: Callable[[int], None],
    ) -> None:
        self.app = app
        # Told how many rows each changelog batch recovery writes.
        self.recovered = recovered
        self.partitions = partitions
        self.rocks = rocks
        self.max_value_bytes = max_value_bytes
        self.rows = rows
        self.all: dict[str, WriteBehindTable] = {}
        # Each (table, space, partition)'s oldest day on the horizon's index, and the table's `resets`
        # when it was read: every event asks whether a day is past the horizon, and almost never is one
        # (docs/decisions/0027-listing-index-one-key-an-entry.md). A day noted or evicted moves it.
        self._oldest_day: dict[tuple[str, str, int], tuple[int, int | None]] = {}

    def table(self, name: str) -> WriteBehindTable:
        """The table `name`, registered with the app on first use."""
        if name not in self.all:
            table = WriteBehindTable(
                self.app,
                name=name,
                beacon=self.app.tables.beacon,
                default=None,
                partitions=self.partitions,
                key_type=bytes,
                value_type=bytes,
                rows=self.rows,
                recovered=self.recovered,
            )
            self.app.tables.add(table)
            if isinstance(table.data, RocksDBStore):
                # Faust gives each table database its own cache; the worker's budget is shared.
                table.data.rocksdb_options = BudgetedFaustOptions(self.rocks)
            self.all[name] = table
        return self.all[name]

    def get(self, name: str, key: str, kind: Any) -> Any:
        """The row under `key` decoded as `kind` (a struct, a union of structs, a plain type), or None."""
        return self.all[name].decoded(key.encode(), kind)

    def put(self, name: str, key: str, value: Any) -> None:
        encoded = msgspec.json.encode(value)
        if len(encoded) > self.max_value_bytes:
            # Past the bound no changelog could take it: refuse here, so the record is dead-lettered
            # instead of every refold failing on the producer.
            raise ValueTooLarge(f"{name} value of {len(encoded)} bytes")
        self.all[name].write(key.encode(), encoded, value)

    def delete(self, name: str, key: str) -> None:
        self.all[name].write(key.encode(), None)

    def due_times(self, name: str) -> Iterator[tuple[str, int]]:
        """Every key and due time of the sweep table `name` this worker holds, the rows not yet flushed included."""
        for raw_key, raw_due in self.all[name].written_items():
            yield raw_key.decode(), int(raw_due)

    def reader(self, name: str, kind: Any = Any) -> Callable[[str], Any]:
        """A lookup by key, for the pure code that reads a table (`domain.queries`, `domain.index`)."""
        return lambda key: self.get(name, key, kind)

    def scanner(self, name: str) -> index.Scan:
        """A range read of the current event's partition, for the pure code that reads an index (`domain.index`)."""
        table = self.all[name]

        def scan(low: str, high: str, backwards: bool = False) -> Iterator[tuple[str, Any]]:
            for raw_key, raw in table.scan(low.encode(), high.encode(), backwards):
                yield raw_key.decode(), msgspec.json.decode(raw)

        return scan

    def write(self, name: str, writes: dict[str, Any]) -> None:
        """Each key's new value; None deletes it."""
        for key, value in writes.items():
            if value is None:
                self.delete(name, key)
            else:
                self.put(name, key, value)

    def add_to_index(self, name: str, space: str, account: str, partition: int, entry: index.Entry) -> None:
        self.write(name, index.additions(self.reader(name), space, account, partition, entry))
        noted = horizon.track(self.reader(name), space, account, partition, entry.at)
        if noted:
            self.write(name, noted)
            known = self._oldest_day.get((name, space, partition))
            if known is not None:
                day = horizon.day_of(entry.at)
                self._oldest_day[(name, space, partition)] = (known[0], day if known[1] is None else min(known[1], day))

    def evict(self, name: str, space: str, partition: int, at: int, hot_days: int) -> horizon.Eviction | None:
        """Takes one account's day past the horizon out of the index in `name`; the caller deletes the rows."""
        slot = (name, space, partition)
        resets = self.all[name].resets
        known = self._oldest_day.get(slot)
        if known is None or known[0] != resets:
            known = (resets, horizon.oldest_day(self.scanner(name), space, partition))
            self._oldest_day[slot] = known
        oldest = known[1]
        if oldest is None or oldest >= horizon.cut(at, hot_days):
            return None
        eviction = horizon.evict(self.scanner(name), space, partition, at, hot_days)
        # Read again at the next event: the day taken out may have been the partition's last that old.
        self._oldest_day.pop(slot, None)
        if eviction is not None:
            self.write(name, eviction.writes)
        return eviction

    def databases(self) -> list[Any]:
        """Every partition database of every table this worker has open."""
        return [db for table in self.all.values() for db in table.databases()]

    def persist(self) -> None:
        """Every table's rows on disk: a clean stop's, as RocksDB writes them without its log
        (processors/state/rocks.py)."""
        for table in self.all.values():
            table.persist()

    async def flush(self, send_batch: SendBatch) -> list[asyncio.Future[Any]]:
        """Send every table's changed keys to its changelog; the acks to wait for."""
        written: list[asyncio.Future[Any]] = []
        for table in self.all.values():
            written += await table.flush_changelog(send_batch)
        return written
