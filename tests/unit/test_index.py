"""The listing index: an entry is a key of its own under its hour, so no value grows with the traffic."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from domain import index
from domain.index import CallEntry
from domain.replay import scan_of
from domain.rules import DAY_MS

HOUR = index.BUCKET_MS


def apply(store: dict[str, Any], entry: CallEntry) -> dict[str, Any]:
    writes = index.additions(store.get, "calls", "acct", 3, entry)
    store.update(writes)
    return writes


def listed(store: dict[str, Any], account: str = "acct", partition: int = 3) -> list[tuple[int, list[str]]]:
    return [
        (hour, [e[1] for e in entries])
        for hour, entries in index.newest_first(scan_of(store), "calls", account, partition)
    ]


def test_an_entry_writes_its_own_key_and_nothing_else() -> None:
    store: dict[str, Any] = {}
    writes = apply(store, CallEntry(5 * HOUR + 10, "c1", "+1", "+2", "allow", "api"))
    assert writes == {"idxe|calls|acct|3|0000018000000|c1": [5 * HOUR + 10, "c1", "+1", "+2", "allow", "api"]}
    writes = apply(store, CallEntry(DAY_MS + 20, "c2", "+1", "+3", "review"))
    assert writes == {"idxe|calls|acct|3|0000086400000|c2": [DAY_MS + 20, "c2", "+1", "+3", "review", "api"]}
    assert listed(store) == [(DAY_MS, ["c2"]), (5 * HOUR, ["c1"])]


def test_second_entry_in_the_same_hour_writes_its_key_only() -> None:
    store: dict[str, Any] = {}
    apply(store, CallEntry(5 * HOUR + 10, "c1", "+1", "+2", "allow"))
    writes = apply(store, CallEntry(5 * HOUR + 20, "c2", "+1", "+3", "review"))
    assert writes == {"idxe|calls|acct|3|0000018000000|c2": [5 * HOUR + 20, "c2", "+1", "+3", "review", "api"]}
    assert listed(store) == [(5 * HOUR, ["c1", "c2"])]


def test_an_entry_already_indexed_writes_nothing() -> None:
    store: dict[str, Any] = {}
    apply(store, CallEntry(5 * HOUR + 10, "c1", "+1", "+2", "allow"))
    assert apply(store, CallEntry(5 * HOUR + 10, "c1", "+1", "+2", "allow")) == {}


def test_hours_come_newest_first_whatever_order_they_arrived_in() -> None:
    store: dict[str, Any] = {}
    for at, call_id in [(DAY_MS + 7 * HOUR, "late"), (2 * HOUR, "early"), (DAY_MS + 7 * HOUR + 1, "late2")]:
        apply(store, CallEntry(at, call_id, "+1", "+2", "allow"))
    assert listed(store) == [(DAY_MS + 7 * HOUR, ["late", "late2"]), (2 * HOUR, ["early"])]


def test_an_hour_lists_its_own_entries_only() -> None:
    """Neighbouring hours, accounts and partitions, whose keys sort next to the hour's."""
    store: dict[str, Any] = {}
    apply(store, CallEntry(2 * HOUR, "two", "+1", "+2", "allow"))
    apply(store, CallEntry(10 * HOUR, "ten", "+1", "+2", "allow"))
    apply(store, CallEntry(3 * HOUR - 1, "two-last", "+1", "+2", "allow"))
    store.update(index.additions(store.get, "calls", "acct2", 3, CallEntry(2 * HOUR, "other", "+1", "+2", "allow")))
    store.update(index.additions(store.get, "calls", "acct", 30, CallEntry(2 * HOUR, "far", "+1", "+2", "allow")))
    assert listed(store) == [(10 * HOUR, ["ten"]), (2 * HOUR, ["two", "two-last"])]
    assert listed(store, "acct2") == [(2 * HOUR, ["other"])]
    assert listed(store, partition=30) == [(2 * HOUR, ["far"])]


def test_a_busy_hour_writes_one_key_an_entry_and_no_value_grows() -> None:
    store: dict[str, Any] = {}
    ids = [f"call-{i:05d}-{'x' * 200}" for i in range(1000)]
    for i, call_id in enumerate(ids):
        writes = apply(store, entry(i, call_id))
        assert len(writes) == 1
    assert max(len(str(v)) for v in store.values()) < 400
    assert [call_id for _, call_ids in listed(store) for call_id in call_ids] == ids


def entry(i: int, call_id: str) -> CallEntry:
    return CallEntry(5 * HOUR + i, call_id, "+14155552671", "+12125550123", "allow")


def test_the_source_filter_and_the_cursor() -> None:
    entry = CallEntry(5 * HOUR, "c1", "+1", "+2", "allow", "gate")
    assert index.CallFilter(source="gate").matches(entry)
    assert not index.CallFilter(source="api").matches(entry)
    assert index.decode_cursor(index.encode_cursor(entry)) == (5 * HOUR, "c1")
    assert index.decode_cursor("!!") is None


def test_the_newest_hour_is_read_without_the_hours_before_it() -> None:
    """A listing's first page of a long history reads the keys it shows, and one more that ends the hour."""
    store: dict[str, Any] = {}
    for n in range(5):
        apply(store, CallEntry(n * HOUR, f"c{n}", "+1", "+2", "allow"))
    apply(store, CallEntry(4 * HOUR + 1, "c4b", "+1", "+2", "allow"))
    read: list[str] = []

    def counting(low: str, high: str, backwards: bool = False) -> Iterator[tuple[str, Any]]:
        for key, value in scan_of(store)(low, high, backwards):
            read.append(key)
            yield key, value

    hours = index.newest_first(counting, "calls", "acct", 3)
    assert [(hour, [e[1] for e in entries]) for hour, entries in [next(hours)]] == [(4 * HOUR, ["c4", "c4b"])]
    assert len(read) == 3
