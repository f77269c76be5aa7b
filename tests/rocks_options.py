"""What a worker's RocksDB databases were opened with, as RocksDB wrote it: the newest OPTIONS file of each."""

from __future__ import annotations

from pathlib import Path

from processors.state.rocks import MEMTABLE_BYTES


def latest_options(db_dir: Path) -> dict[str, str]:
    """The `key=value` lines of the newest OPTIONS file RocksDB wrote for a database."""
    written = [p for p in db_dir.glob("OPTIONS-*") if p.name.split("-")[1].isdigit()]
    newest = max(written, key=lambda p: int(p.name.split("-")[1]))
    pairs = (line.strip().split("=", 1) for line in newest.read_text().splitlines() if "=" in line)
    options: dict[str, str] = {}
    for key, value in pairs:
        options.setdefault(key, value)
    return options


def worker_databases(data_dir: Path) -> list[Path]:
    """Every table partition's database and feature view of every worker under a service's data dir."""
    tables = sorted(data_dir.glob("worker-*/gen-*/faust/v1/tables/*.db"))
    return tables + sorted(data_dir.glob("worker-*/gen-*/features"))


def assert_opened_within_budget(db_dir: Path) -> None:
    options = latest_options(db_dir)
    # Faust's defaults are 64 MB memtables and a 2 GiB cache a database; rocksdict opened a database
    # again with a cache of its own and no filter. Reads of absent keys need the bloom filter, kept
    # outside the cache (processors/state/rocks.py).
    assert (db_dir.name, options["write_buffer_size"]) == (db_dir.name, str(MEMTABLE_BYTES))
    assert (db_dir.name, options["filter_policy"]) == (db_dir.name, "bloomfilter")
    assert (db_dir.name, options["cache_index_and_filter_blocks"]) == (db_dir.name, "false")
