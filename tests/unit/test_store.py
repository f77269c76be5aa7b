"""One contract for every store the feature view folds into: in memory, and RocksDB on disk."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from domain.facts import BlockPlaced
from domain.features import FeatureView
from domain.rules import ScoringRules
from domain.store import MemoryStore, Store
from processors.rocks import RocksBudget
from processors.rocks_store import RocksStore


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


def test_the_feature_view_folds_the_same_on_either_store(store: Store) -> None:
    view = FeatureView(store, ScoringRules())
    block = BlockPlaced(
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
    assert view.apply(block) is True
    assert view.apply(block) is False
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
