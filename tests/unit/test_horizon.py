"""The hot-table horizon over plain dicts, with explicit event times (domain/horizon.py)."""

from __future__ import annotations

from typing import Any

import pytest

from domain import horizon, index, keys
from domain.index import AlertEntry, CallEntry
from domain.replay import scan_of
from domain.rules import DAY_MS, HOUR_MS

HOT_DAYS = 30
PARTITION = 2


class Worker:
    """What a worker's fold does with the horizon, over a dict: index the record, note its day, evict."""

    def __init__(self, space: str = "calls") -> None:
        self.space = space
        self.index: dict[str, Any] = {}
        self.rows: dict[str, str] = {}

    def fold(self, account: str, item: str, at: int, fold_at: int | None = None) -> horizon.Eviction | None:
        entry = CallEntry(at, item, "+1", "+2", "allow") if self.space == "calls" else AlertEntry(at, item, "rate")
        self.rows[keys.call(account, item)] = item
        self.write(index.additions(self.index.get, self.space, account, PARTITION, entry))
        self.write(horizon.track(self.index.get, self.space, account, PARTITION, at))
        return self.tick(at if fold_at is None else fold_at)

    def tick(self, at: int) -> horizon.Eviction | None:
        eviction = horizon.evict(scan_of(self.index), self.space, PARTITION, at, HOT_DAYS)
        if eviction is not None:
            self.write(eviction.writes)
            for item in eviction.items:
                del self.rows[keys.call(eviction.account, item)]
        return eviction

    def write(self, writes: dict[str, Any]) -> None:
        for key, value in writes.items():
            if value is None:
                self.index.pop(key, None)
            else:
                self.index[key] = value

    def listed(self, account: str) -> list[str]:
        return [
            e[1]
            for _, entries in index.newest_first(scan_of(self.index), self.space, account, PARTITION)
            for e in entries
        ]


def day(n: int, hour: int = 0) -> int:
    return n * DAY_MS + hour * HOUR_MS


@pytest.mark.parametrize("space", ["calls", "alerts"])
def test_a_record_stays_through_its_last_day_and_leaves_the_day_after(space: str) -> None:
    worker = Worker(space)
    worker.fold("a", "old", day(10, 5))
    assert worker.fold("a", "edge", day(10 + HOT_DAYS, 23)) is None
    eviction = worker.fold("a", "new", day(11 + HOT_DAYS))
    assert eviction == horizon.Eviction("a", ["old"], eviction.writes if eviction else {})
    assert worker.rows == {"a:edge": "edge", "a:new": "new"}
    assert worker.listed("a") == ["new", "edge"]


def test_an_evicted_day_leaves_no_key_behind() -> None:
    """The index after eviction is the index the surviving records alone would have made."""
    worker = Worker()
    for n in range(70):
        worker.fold("a", f"old{n}", day(3, n % 24))
    worker.fold("b", "other", day(3, 1))
    for n in range(3):
        worker.fold("a", f"also{n}", day(4, n))
    worker.fold("a", "kept", day(40))
    while worker.tick(day(40)) is not None:
        pass
    fresh = Worker()
    fresh.fold("a", "kept", day(40))
    assert worker.index == fresh.index
    assert worker.rows == fresh.rows


def test_each_fold_takes_out_at_most_one_accounts_day() -> None:
    worker = Worker()
    for account in ("a", "b", "c"):
        worker.fold(account, f"{account}1", day(0))
    evicted = [worker.fold("d", f"d{n}", day(HOT_DAYS + 1, n)) for n in range(4)]
    assert [(e.account, e.items) if e else None for e in evicted] == [("a", ["a1"]), ("b", ["b1"]), ("c", ["c1"]), None]
    assert set(worker.rows) == {"d:d0", "d:d1", "d:d2", "d:d3"}


def test_a_record_folded_late_into_a_day_past_the_horizon_leaves_at_the_next_fold() -> None:
    """A quiet import older than the horizon is noted and taken out again: nothing stays behind."""
    worker = Worker()
    worker.fold("a", "now", day(100))
    assert worker.fold("a", "imported", day(50), fold_at=day(50)) is None
    eviction = worker.tick(day(100))
    assert eviction is not None and eviction.items == ["imported"]
    assert worker.listed("a") == ["now"] and set(worker.rows) == {"a:now"}


def test_a_day_noted_twice_is_noted_once() -> None:
    worker = Worker()
    worker.fold("a", "c1", day(5, 1))
    assert horizon.track(worker.index.get, "calls", "a", PARTITION, day(5, 9)) == {}


def test_the_same_folds_give_the_same_tables() -> None:
    """Only event times decide: a replay of the same folds evicts the same records at the same folds."""
    folds = [("a", f"c{n}", day(n * 7 % 60, n % 24)) for n in range(120)]
    first, second = Worker(), Worker()
    trail = [first.fold(*fold) for fold in folds]
    assert [second.fold(*fold) for fold in folds] == trail
    assert first.index == second.index and first.rows == second.rows


def test_nothing_is_evicted_while_the_oldest_day_is_not_before_the_cut() -> None:
    # The worker asks `oldest_day` once and `evict` only when that day is before the cut (processors/state/tables.py).
    worker = Worker()
    for n, at in enumerate((day(3, 5), day(1, 2), day(40, 1), day(2, 7))):
        worker.fold("acct_a", f"c{n}", at, fold_at=day(0))
    for at in (day(0), day(31), day(31, 23), day(32), day(33), day(70), day(71)):
        oldest = horizon.oldest_day(scan_of(worker.index), "calls", PARTITION)
        quiet = oldest is None or oldest >= horizon.cut(at, HOT_DAYS)
        assert (at, quiet) == (at, worker.tick(at) is None)
    assert horizon.oldest_day(scan_of(worker.index), "calls", PARTITION) is None
