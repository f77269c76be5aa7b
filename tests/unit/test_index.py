"""The listing index: hours in pages of their own keys, so no value grows with the traffic."""

from __future__ import annotations

from typing import Any

import pytest

from domain import index
from domain.index import CallEntry
from domain.rules import DAY_MS
from domain.store import MemoryStore

HOUR = index.BUCKET_MS


def apply(store: dict[str, Any], entry: CallEntry) -> dict[str, Any]:
    writes = index.additions(store.get, "calls", "acct", 3, entry)
    store.update(writes)
    return writes


def listed(store: dict[str, Any]) -> list[tuple[int, list[str]]]:
    return [(hour, [e[1] for e in entries]) for hour, entries in index.newest_first(store.get, "calls", "acct", 3)]


def test_first_entry_writes_its_page_count_marker_and_the_day_and_hour_lists() -> None:
    store: dict[str, Any] = {}
    writes = apply(store, CallEntry(5 * HOUR + 10, "c1", "+1", "+2", "allow", "api"))
    assert writes == {
        "idx|calls|acct|3|18000000|0": [[5 * HOUR + 10, "c1", "+1", "+2", "allow", "api"]],
        "idxn|calls|acct|3|18000000": 1,
        "idxm|calls|acct|3|c1": 5 * HOUR,
        "idxh|calls|acct|3|0": [5 * HOUR],
        "idxd|calls|acct|3": [0],
    }


def test_second_entry_in_the_same_hour_writes_its_page_count_and_marker_only() -> None:
    store: dict[str, Any] = {}
    apply(store, CallEntry(5 * HOUR + 10, "c1", "+1", "+2", "allow"))
    writes = apply(store, CallEntry(5 * HOUR + 20, "c2", "+1", "+3", "review"))
    assert set(writes) == {"idx|calls|acct|3|18000000|0", "idxm|calls|acct|3|c2", "idxn|calls|acct|3|18000000"}
    assert listed(store) == [(5 * HOUR, ["c1", "c2"])]


def test_an_entry_already_indexed_writes_nothing() -> None:
    store: dict[str, Any] = {}
    apply(store, CallEntry(5 * HOUR + 10, "c1", "+1", "+2", "allow"))
    assert apply(store, CallEntry(5 * HOUR + 10, "c1", "+1", "+2", "allow")) == {}


def test_a_marker_whose_page_was_recovered_without_its_entry_gets_the_entry_again() -> None:
    """A fold killed before its changelog flush, then folded again on a table whose page came back older."""
    store: dict[str, Any] = {}
    apply(store, CallEntry(5 * HOUR + 10, "c1", "+1", "+2", "allow"))
    older = {key: value for key, value in store.items() if key != "idxm|calls|acct|3|c2"}
    apply(store, CallEntry(5 * HOUR + 20, "c2", "+1", "+3", "review"))
    recovered = {**older, "idxm|calls|acct|3|c2": store["idxm|calls|acct|3|c2"]}
    apply(recovered, CallEntry(5 * HOUR + 20, "c2", "+1", "+3", "review"))
    assert listed(recovered) == [(5 * HOUR, ["c1", "c2"])]
    assert apply(recovered, CallEntry(5 * HOUR + 20, "c2", "+1", "+3", "review")) == {}


def test_a_count_recovered_behind_its_pages_hides_nothing_and_duplicates_nothing() -> None:
    """A kill between a changelog flush's records: the count came back older than the page after it."""
    store: dict[str, Any] = {}
    ids = [f"c{i}" for i in range(index.PAGE + 1)]
    for i, call_id in enumerate(ids):
        apply(store, entry(i, call_id))
    store["idxn|calls|acct|3|18000000"] = index.PAGE
    assert listed(store) == [(5 * HOUR, ids)]
    assert apply(store, entry(index.PAGE, ids[-1])) == {"idxn|calls|acct|3|18000000": index.PAGE + 1}
    apply(store, entry(index.PAGE + 1, "next"))
    assert listed(store) == [(5 * HOUR, [*ids, "next"])]


@pytest.mark.parametrize("calls", [2, index.PAGE, index.PAGE + 1])
@pytest.mark.parametrize("count_lost", [False, True])
def test_an_entry_on_its_page_without_its_marker_is_not_added_twice(calls: int, count_lost: bool) -> None:
    """The page's record reached the changelog, the marker's (and the count's) did not, and another
    worker took over."""
    store: dict[str, Any] = {}
    ids = [f"c{i}" for i in range(calls)]
    for i, call_id in enumerate(ids):
        apply(store, entry(i, call_id))
    del store[f"idxm|calls|acct|3|{ids[-1]}"]
    lost = {"idxn|calls|acct|3|18000000": calls} if count_lost else {}
    if count_lost:
        store["idxn|calls|acct|3|18000000"] = calls - 1
    assert apply(store, entry(calls - 1, ids[-1])) == {f"idxm|calls|acct|3|{ids[-1]}": 5 * HOUR, **lost}
    assert listed(store) == [(5 * HOUR, ids)]


def test_a_day_list_recovered_without_its_day_gets_it_back() -> None:
    store: dict[str, Any] = {}
    apply(store, entry(0, "c1"))
    store["idxd|calls|acct|3"] = []
    assert apply(store, entry(0, "c1")) == {"idxd|calls|acct|3": [0]}
    assert listed(store) == [(5 * HOUR, ["c1"])]


def test_hours_come_newest_first_whatever_order_they_arrived_in() -> None:
    store: dict[str, Any] = {}
    for at, call_id in [(DAY_MS + 7 * HOUR, "late"), (2 * HOUR, "early"), (DAY_MS + 7 * HOUR + 1, "late2")]:
        apply(store, CallEntry(at, call_id, "+1", "+2", "allow"))
    assert listed(store) == [(DAY_MS + 7 * HOUR, ["late", "late2"]), (2 * HOUR, ["early"])]


def test_a_busy_hour_fills_pages_and_no_value_outgrows_one_page() -> None:
    store = MemoryStore()
    ids = [f"call-{i:05d}-{'x' * 200}" for i in range(1000)]
    for i, call_id in enumerate(ids):
        for key, value in index.additions(store.get, "calls", "a", 0, entry(i, call_id)).items():
            store.put(key, value)
    assert max(len(v) for v in store.data.values()) < index.PAGE * 400
    assert [e[1] for _, entries in index.newest_first(store.get, "calls", "a", 0) for e in entries] == ids


def entry(i: int, call_id: str) -> CallEntry:
    return CallEntry(5 * HOUR + i, call_id, "+14155552671", "+12125550123", "allow")


def test_the_source_filter_and_the_cursor() -> None:
    entry = CallEntry(5 * HOUR, "c1", "+1", "+2", "allow", "gate")
    assert index.CallFilter(source="gate").matches(entry)
    assert not index.CallFilter(source="api").matches(entry)
    assert index.decode_cursor(index.encode_cursor(entry)) == (5 * HOUR, "c1")
    assert index.decode_cursor("!!") is None
