"""One contract for every store the feature view folds into: in memory, and RocksDB on disk."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import msgspec
import pytest

from domain.facts import BlockPlaced
from domain.features import FeatureView
from domain.rules import ScoringRules
from domain.store import MemoryStore, Store
from processors.state import rocks as rocks_store
from processors.state.rocks import RocksBudget, RocksStore
from processors.state.row_cache import RowMismatch


@pytest.fixture(params=["memory", "rocksdb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    made: Store = MemoryStore() if request.param == "memory" else RocksStore(tmp_path / "db", RocksBudget(8))
    yield made
    made.close()


def test_a_missing_key_is_none(store: Store) -> None:
    assert store.get("nothing|here") is None


def test_json_shaped_values_come_back_as_they_went_in(store: Store) -> None:
    values = {"n": 3, "f": 0.25, "s": "x", "l": [1, "a", None], "d": {"k": [1, 2]}, "t": True, "z": None}
    for key, value in values.items():
        store.put(f"v|{key}", value)
    assert {key: store.get(f"v|{key}") for key in values} == values


def test_a_put_replaces_the_value(store: Store) -> None:
    store.put("k", [1])
    store.put("k", {"two": 2})
    assert store.get("k") == {"two": 2}


def test_a_deleted_key_is_none_and_a_later_put_brings_it_back(store: Store) -> None:
    store.put("k", [1])
    store.delete("k")
    store.delete("never|put")
    assert (store.get("k"), store.get("never|put")) == (None, None)
    store.put("k", [2])
    assert store.get("k") == [2]


BLOCK = BlockPlaced(
    id="alrt_x:+12125550123",
    account_id="acct_x",
    number="+14155552671",
    at=1_000,
    alert_id="alrt_x",
    caller="+12125550123",
    reason="caller.rate_exceeded",
    since=1_000,
    until=3_601_000,
)


def test_the_feature_view_folds_the_same_on_either_store(store: Store) -> None:
    view = FeatureView(store, ScoringRules())
    assert view.apply(BLOCK) is True
    assert view.apply(BLOCK) is False
    found = view.block("acct_x", "+14155552671", "+12125550123", 2_000)
    assert found is not None and found.reason == "caller.rate_exceeded"
    assert view.block("acct_x", "+14155552671", "+12125550123", 3_601_000) is None


def test_rocksdb_puts_reach_the_database_at_write_pending_and_at_close(tmp_path: Path) -> None:
    budget = RocksBudget(8)
    store = RocksStore(tmp_path / "db", budget)
    store.put("a", {"n": 1})
    assert store.db.get(b"a") is None
    store.write_pending()
    assert store.db.get(b"a") == b'{"n":1}'
    store.put("a", {"n": 2})
    store.put("b", [1])
    store.close()
    reopened = RocksStore(tmp_path / "db", budget)
    assert (reopened.get("a"), reopened.get("b")) == ({"n": 2}, [1])
    reopened.close()


class CountingReads:
    """The real database, its reads counted."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.reads = 0

    def get(self, key: bytes) -> Any:
        self.reads += 1
        return self.db.get(key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)


def test_rocksdb_reads_a_key_once_absent_ones_included_and_never_one_it_put(tmp_path: Path) -> None:
    budget = RocksBudget(8)
    first = RocksStore(tmp_path / "db", budget)
    first.put("a", {"n": 1})
    first.close()
    store = RocksStore(tmp_path / "db", budget)
    counted = CountingReads(store.db)
    store.db = cast(Any, counted)
    assert [store.get("a"), store.get("a"), store.get("gone"), store.get("gone")] == [{"n": 1}, {"n": 1}, None, None]
    assert counted.reads == 2
    # Kept past a flush, and a value put is kept as it was put, not read back.
    store.write_pending()
    store.put("b", [1, 2])
    store.write_pending()
    assert (store.get("a"), store.get("b"), store.get("gone")) == ({"n": 1}, [1, 2], None)
    assert counted.reads == 2
    store.db = counted.db
    store.close()


def test_rocksdb_in_check_mode_refuses_a_value_json_would_give_back_changed(tmp_path: Path) -> None:
    store = RocksStore(tmp_path / "db", RocksBudget(8), check=True)
    store.put("fine", {"n": [1, 2], "s": "x", "f": 0.5})
    with pytest.raises(RowMismatch):
        store.put("tuple", {"n": (1, 2)})
    store.close()


def test_rocksdb_a_delete_reaches_the_database_and_hides_what_it_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One value kept a generation: reading two other keys forgets the delete, so the next read of it is the
    # store's own.
    monkeypatch.setattr(rocks_store, "READ_KEPT", 1)
    budget = RocksBudget(8)
    store = RocksStore(tmp_path / "db", budget)
    store.put("a", {"n": 1})
    store.write_pending()
    store.delete("a")
    assert store.get("other") is None
    assert store.get("another") is None
    # Before the batch is written: the pending delete, not what RocksDB still holds.
    assert store.get("a") is None
    store.write_pending()
    assert store.db.get(b"a") is None
    store.close()
    reopened = RocksStore(tmp_path / "db", budget)
    assert reopened.get("a") is None
    reopened.close()


def test_rocksdb_a_struct_put_replaces_a_value_kept_a_generation_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rocks_store, "READ_KEPT", 1)
    store = RocksStore(tmp_path / "db", RocksBudget(8))
    store.put("b", [1])
    # Another key read: the list is kept one generation back, where a get still finds it.
    assert store.get("other") is None
    assert store.get("b") == [1]
    assert store.get("other") is None
    store.put("b", BLOCK)
    assert store.get("b") == msgspec.to_builtins(BLOCK)
    store.close()


def test_rocksdb_a_put_replaces_a_value_read_before_it(tmp_path: Path) -> None:
    store = RocksStore(tmp_path / "db", RocksBudget(8))
    assert store.get("b") is None
    # A struct put comes back as the builtins any other store gives, not as the struct.
    store.put("b", BLOCK)
    assert store.get("b") == msgspec.to_builtins(BLOCK)
    store.put("b", [2])
    assert store.get("b") == [2]
    store.close()
