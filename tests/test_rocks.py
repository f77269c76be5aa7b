"""One RocksDB memory budget per worker (`processors/state/rocks.py`): on RocksDB itself, and in the running
worker, whose every table partition and feature view must be opened within it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import aiohttp

from infra.clock import now_ms
from processors.state.rocks import MB, MEMTABLE_BYTES, BudgetedFaustOptions, RocksBudget, RocksStore
from tests.rocks_options import assert_opened_within_budget, worker_databases
from tests.service import AccountKeys, RunningService
from tests.traffic import post_all, script

ROWS, ROW_BYTES = 4000, 500
ROOT = Path(__file__).resolve().parent.parent
TABLES = ("alert_store", "billing", "call_index", "calls", "number_sweeps", "number_windows", "outbound", "sweeps")


def test_every_database_uses_the_one_shared_cache(tmp_path: Path) -> None:
    budget = RocksBudget(8)
    dbs = [budget.open(tmp_path / "view"), BudgetedFaustOptions(budget).open(tmp_path / "table-0")]
    try:
        # Faust's own options would give each database a 2 GiB cache of its own.
        assert [db.property_int_value("rocksdb.block-cache-capacity") for db in dbs] == [8 * MB, 8 * MB]
        before = budget.cache.get_usage()
        for i in range(2000):
            dbs[1][f"key-{i}".encode()] = b"x" * 500
        # Memtables are charged to the cache, and the database written to is not the only one that sees
        # the charge: both report the one cache's usage.
        usage = budget.cache.get_usage()
        assert usage > before
        assert [db.property_int_value("rocksdb.block-cache-usage") for db in dbs] == [usage, usage]
    finally:
        for db in dbs:
            db.close()


def test_a_database_opened_again_keeps_the_budget_and_the_filter(tmp_path: Path) -> None:
    budget = RocksBudget(16)
    for name, open_db in (("view", budget.open), ("table-0", BudgetedFaustOptions(budget).open)):
        for _ in range(2):
            db = open_db(tmp_path / name)
            try:
                db[b"key"] = b"value"
                # Opened again, rocksdict gave the existing column family its own 8 MB cache unless named.
                assert (name, db.property_int_value("rocksdb.block-cache-capacity")) == (name, 16 * MB)
            finally:
                db.close()
            assert_opened_within_budget(tmp_path / name)


def flushed_or_flushing(budget_mb: int, root: Path) -> int:
    """Six databases take 2 MB each, half a memtable: how many of them started a flush."""
    budget = RocksBudget(budget_mb)
    dbs = [budget.open(root / f"db-{i}") for i in range(6)]
    try:
        for db in dbs:
            for i in range(ROWS):
                db[f"key-{i}".encode()] = b"x" * ROW_BYTES
        return sum(
            1
            for db in dbs
            if db.property_int_value("rocksdb.total-sst-files-size")
            or db.property_int_value("rocksdb.num-immutable-mem-table")
        )
    finally:
        for db in dbs:
            db.close()


def test_memtables_across_databases_are_flushed_once_they_pass_half_the_budget(tmp_path: Path) -> None:
    assert ROWS * ROW_BYTES < MEMTABLE_BYTES
    # 12 MB of memtables against a 4 MB share of an 8 MB budget: some databases must flush early.
    assert flushed_or_flushing(8, tmp_path / "small") >= 2
    # Against 32 MB of a 64 MB budget nothing needs to: the flushes above came from the budget.
    assert flushed_or_flushing(64, tmp_path / "large") == 0


async def test_the_running_worker_opens_every_database_within_the_budget(
    service: RunningService, http: aiohttp.ClientSession, account: AccountKeys
) -> None:
    answers = await post_all(http, service.base_url, account, script(seed=5, base=now_ms() - 60_000, calls=1))
    assert {status for status, _ in answers} == {200}
    # Every worker's directory: a second worker may have joined the service and taken partitions.
    databases = worker_databases(service.data_dir)
    tables = [p for p in databases if p.name.endswith(".db")]
    assert {p.name for p in tables} == {
        f"{table}-{partition}.db" for table in TABLES for partition in range(service.settings.partitions)
    }
    assert any(p.name == "features" for p in databases)
    for db_dir in databases:
        assert_opened_within_budget(db_dir)


HARD_EXIT = """
import os, sys
from pathlib import Path
from processors.state.rocks import BudgetedFaustOptions, RocksBudget, persist, write_rows
db = BudgetedFaustOptions(RocksBudget(8)).open(Path(sys.argv[1]))
write_rows(db, [(b"row", b"x" * 6000), (b"gone", None)])
if sys.argv[2] == "persist":
    persist(db)
# As a kill would: no destructor runs, so RocksDB does not flush the memtable on close.
os._exit(0)
"""


def hard_exit_after(script: str, path: Path, how: str) -> None:
    """Runs `script` on the database at `path` in a process of its own, which ends as a kill would."""
    subprocess.run([sys.executable, "-c", script, str(path), how], check=True, cwd=ROOT)


def rows_after_a_hard_exit(path: Path, how: str) -> tuple[bytes | None, bytes | None]:
    hard_exit_after(HARD_EXIT, path, how)
    db = BudgetedFaustOptions(RocksBudget(8)).open(path)
    try:
        return db.get(b"row"), db.get(b"gone")
    finally:
        db.close()


def test_a_table_database_writes_without_the_log_and_persist_puts_its_rows_on_disk(tmp_path: Path) -> None:
    # No write-ahead log: rows never flushed to disk are gone after the process dies.
    assert rows_after_a_hard_exit(tmp_path / "table-0", "exit") == (None, None)
    assert rows_after_a_hard_exit(tmp_path / "table-1", "persist") == (b"x" * 6000, None)


VIEW_HARD_EXIT = """
import os, sys
from pathlib import Path
from processors.state.rocks import RocksBudget
from processors.state.rocks import RocksStore
store = RocksStore(Path(sys.argv[1]), RocksBudget(8))
store.put("kept", {"n": 1})
store.write_pending()
if sys.argv[2] == "persist":
    store.put("late", [2])
    store.persist()
os._exit(0)
"""


def test_the_feature_view_writes_without_the_log_and_persist_puts_its_puts_on_disk(tmp_path: Path) -> None:
    for how, found in (("exit", (None, None)), ("persist", ({"n": 1}, [2]))):
        path = tmp_path / how
        hard_exit_after(VIEW_HARD_EXIT, path, how)
        store = RocksStore(path, RocksBudget(8))
        try:
            assert (how, store.get("kept"), store.get("late")) == (how, *found)
        finally:
            store.close()
