"""The listing index: hour buckets, the bucket list written only when it gains a bucket."""

from __future__ import annotations

from typing import Any

from domain import index
from domain.index import CallEntry

HOUR = index.BUCKET_MS


def apply(store: dict[str, Any], entry: CallEntry) -> dict[str, Any]:
    writes = index.additions(store.get, "calls", "acct", 3, entry)
    store.update(writes)
    return writes


def test_first_entry_writes_its_bucket_and_the_bucket_list() -> None:
    store: dict[str, Any] = {}
    writes = apply(store, CallEntry(5 * HOUR + 10, "c1", "+1", "+2", "allow", "api"))
    assert writes == {
        "idx|calls|acct|3|18000000": [[5 * HOUR + 10, "c1", "+1", "+2", "allow", "api"]],
        "buckets|calls|acct|3": [5 * HOUR],
    }


def test_second_entry_in_the_same_hour_leaves_the_bucket_list_alone() -> None:
    store: dict[str, Any] = {}
    apply(store, CallEntry(5 * HOUR + 10, "c1", "+1", "+2", "allow"))
    writes = apply(store, CallEntry(5 * HOUR + 20, "c2", "+1", "+3", "review"))
    assert list(writes) == ["idx|calls|acct|3|18000000"]
    assert [e[1] for e in store["idx|calls|acct|3|18000000"]] == ["c1", "c2"]


def test_an_entry_already_indexed_writes_nothing() -> None:
    store: dict[str, Any] = {}
    apply(store, CallEntry(5 * HOUR + 10, "c1", "+1", "+2", "allow"))
    assert apply(store, CallEntry(5 * HOUR + 10, "c1", "+1", "+2", "allow")) == {}


def test_buckets_come_newest_first_whatever_order_they_arrived_in() -> None:
    store: dict[str, Any] = {}
    for at, call_id in [(7 * HOUR, "late"), (2 * HOUR, "early"), (7 * HOUR + 1, "late2")]:
        apply(store, CallEntry(at, call_id, "+1", "+2", "allow"))
    listed = [
        (bucket, [e[1] for e in entries]) for bucket, entries in index.newest_first(store.get, "calls", "acct", 3)
    ]
    assert listed == [(7 * HOUR, ["late", "late2"]), (2 * HOUR, ["early"])]


def test_the_source_filter_and_the_cursor() -> None:
    entry = CallEntry(5 * HOUR, "c1", "+1", "+2", "allow", "gate")
    assert index.CallFilter(source="gate").matches(entry)
    assert not index.CallFilter(source="api").matches(entry)
    assert index.decode_cursor(index.encode_cursor(entry)) == (5 * HOUR, "c1")
    assert index.decode_cursor("!!") is None
