"""The feature view's store in RocksDB: JSON values under string keys, within the worker's budget.

It keeps the `domain.store.Store` contract (tests/unit/test_store.py runs it on both stores). A put is
kept in memory, where gets see it, until `write_pending` writes every put since the last one in a
single write batch: a start's fact puts about ten keys, and each put of its own was a write to
RocksDB's write-ahead log (docs/profiles/README.md, "The feature view written behind"). The worker
calls `write_pending` in each changelog flush, before it acknowledges the events the flush covers, so
a committed offset never runs ahead of the view; the mirror's positions reach RocksDB in the same
batch as the facts they cover. After a crash the mirror reads the log up to its end before any event
is folded (`processors/mirror.py`), so a fact the flush had not written but the log holds is back.

Its writes skip RocksDB's write-ahead log, as the tables' do (processors/rocks.py): what RocksDB holds on
disk is always a whole memtable flush, the mirror's positions with the facts they cover, so a crash leaves
an earlier view that the mirror brings up to date from the log. A clean stop writes it to disk (`persist`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from processors.rocks import RocksBudget, persist, unlogged, write_rows
from processors.row_cache import RowMismatch, same

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
        # keys included (docs/profiles/README.md, "The view's values kept"). A value kept is the store's own:
        # the view changes one only to put it back. A struct put is forgotten: a get gives builtins.
        # An account's numbers and day count, read by each of its starts, were forgotten with everything else
        # every 2,000 calls or so, and read and decoded again (docs/profiles/README.md, "The view's values
        # kept in two generations").
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
