"""Listings read a bounded number of index rows per partition and question (`Settings.query_scan_max_rows`),
seek to their cursor, `until` and `since`, and the edge pages from where a partition stopped: a short page,
even an empty one, with a cursor that skips nothing (`domain.index.Hours`, `page_of`; `merge_pages`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from callscreen.testing import Account, Harness, as_sent
from domain import index, queries
from domain.index import AlertEntry, CallEntry, Hours
from domain.queries import CallsList
from domain.replay import scan_of
from domain.rules import HOUR_MS
from domain.times import format_ms
from ingest.routes_reads import merge_pages

H = HOUR_MS
PARTITION = 3


def flat(pages: list[list[str]]) -> list[str]:
    return [item for page in pages for item in page]


def call(at: int, call_id: str, source: str = "api") -> CallEntry:
    return CallEntry(at, call_id, "+14155552671", "+12125550123", "allow", source)


def reply(entries: list[CallEntry], stop: tuple[int, str] | None) -> dict[str, Any]:
    """A partition's answer as the edge receives it (JSON: the stop is an array)."""
    body = {"entries": entries, "calls": {e.call_id: {"call_id": e.call_id} for e in entries}, "stop": stop}
    return {"status": 200, "body": as_sent(body)}


def merged(replies: list[dict[str, Any]], limit: int) -> tuple[list[str], Any]:
    page = merge_pages(replies, "calls", list[CallEntry], limit)
    cursor = page["next_cursor"]
    return [c["call_id"] for c in page["data"]], None if cursor is None else index.decode_cursor(cursor)


# Three partitions' answers to one question: p1 stopped at its bound having read down to the start of hour 8.
P0 = reply([call(12 * H + 1, "p0a"), call(7 * H, "p0b")], None)
P1 = reply([call(9 * H + 5, "p1a")], (8 * H, ""))
P2 = reply([call(11 * H, "p2a"), call(10 * H, "p2b"), call(6 * H, "p2c")], None)


def test_a_partition_that_stopped_early_holds_the_page_at_its_stop() -> None:
    # p0b and p2c are older than where p1 stopped: p1 may hold calls between them that it has not read.
    assert merged([P0, P1, P2], limit=5) == (["p0a", "p2a", "p2b", "p1a"], (8 * H, ""))


def test_a_full_page_above_the_stop_pages_as_before() -> None:
    assert merged([P0, P1, P2], limit=3) == (["p0a", "p2a", "p2b"], (10 * H, "p2b"))


def test_the_newest_stop_of_several_holds_the_page() -> None:
    p3 = reply([call(10 * H + 7, "p3a")], (10 * H, ""))
    assert merged([P0, P1, P2, p3], limit=5) == (["p0a", "p2a", "p3a", "p2b"], (10 * H, ""))


def test_a_stop_above_every_entry_gives_an_empty_page_with_a_cursor() -> None:
    p3 = reply([], (13 * H, ""))
    assert merged([P0, P1, P2, p3], limit=5) == ([], (13 * H, ""))
    assert merge_pages([P0, p3], "calls", list[CallEntry], 5) == {
        "data": [],
        "next_cursor": index.encode_cursor((13 * H, "")),
    }


def test_without_a_stop_the_page_is_the_newest_and_the_last_says_so() -> None:
    p1 = reply([call(9 * H + 5, "p1a")], None)
    assert merged([P0, p1, P2], limit=3) == (["p0a", "p2a", "p2b"], (10 * H, "p2b"))
    assert merged([P0, p1, P2], limit=6) == (["p0a", "p2a", "p2b", "p1a", "p0b", "p2c"], None)
    # A worker from before the bound sends no stop at all.
    old = {"status": 200, "body": {k: v for k, v in P0["body"].items() if k != "stop"}}
    assert merged([old], limit=1) == (["p0a"], (12 * H + 1, "p0a"))


def test_alerts_merge_alike() -> None:
    entries = [AlertEntry(5 * H, "alrt_b", "caller.rate_exceeded"), AlertEntry(3 * H, "alrt_a", "call.suspicious")]
    page, after = index.page_of(list(entries), [(4 * H, "")], 10)
    assert (page, after) == ([entries[0]], (4 * H, ""))


def store_of(hours: dict[int, int]) -> dict[str, Any]:
    """An index with `n` entries in each hour `h`: ids `h<hour>-<i>`."""
    store: dict[str, Any] = {}
    for hour, count in hours.items():
        for i in range(count):
            store.update(index.additions(store.get, "calls", "acct", PARTITION, call(hour * H + i, f"h{hour}-{i}")))
    return store


def counting(store: dict[str, Any], read: list[str]) -> index.Scan:
    def scan(low: str, high: str, backwards: bool = False) -> Iterator[tuple[str, Any]]:
        for key, value in scan_of(store)(low, high, backwards):
            read.append(key)
            yield key, value

    return scan


def hours_read(hours: dict[int, int], max_rows: int | None, **seek: Any) -> tuple[list[int], Any, int]:
    """The hours handed over (in hours), where the read stopped, and how many rows it read."""
    store, read = store_of(hours), list[str]()
    low, high = index.seek("calls", "acct", PARTITION, seek.get("before"), seek.get("since"))
    reading = Hours(counting(store, read), low, high, max_rows)
    handed = [hour // H for hour, _ in reading]
    assert reading.read == len(read)
    return handed, reading.stop, len(read)


SIZES = {10: 3, 9: 2, 8: 1, 7: 2}


def test_at_the_bound_the_hour_under_way_is_left_for_the_next_read() -> None:
    # Row 4 is hour 9's first: hour 10 is whole, hour 9 may not be.
    assert hours_read(SIZES, 4) == ([10], (10 * H, ""), 4)
    assert hours_read(SIZES, 6) == ([10, 9], (9 * H, ""), 6)


def test_the_first_hour_is_read_whole_past_the_bound() -> None:
    # Three rows of hour 10 and the row that ends it: a read always moves on.
    assert hours_read(SIZES, 2) == ([10], (10 * H, ""), 4)


def test_under_the_bound_nothing_stops() -> None:
    assert hours_read(SIZES, 9) == ([10, 9, 8, 7], None, 8)
    assert hours_read(SIZES, None) == ([10, 9, 8, 7], None, 8)


def test_a_cursor_seeks_past_the_newer_hours_without_reading_them() -> None:
    # The cursor a stop gives: nothing of hour 9 or later is read again.
    assert hours_read(SIZES, None, before=(9 * H, "")) == ([8, 7], None, 3)
    # A call's own cursor: its hour is read (its older calls in it), the newer hours are not.
    assert hours_read(SIZES, None, before=(9 * H + 1, "h9-1")) == ([9, 8, 7], None, 5)


def test_since_stops_the_read_at_its_hour() -> None:
    assert hours_read(SIZES, None, since=8 * H + 30) == ([10, 9, 8], None, 6)
    assert hours_read(SIZES, None, before=(9 * H, ""), since=8 * H) == ([8], None, 1)


def test_seek_bounds_outside_the_index_hours() -> None:
    assert index.seek("calls", "a", 0, None, None) == ("idxe|calls|a|0|", "idxe|calls|a|0}")
    assert index.seek("calls", "a", 0, (0, ""), None) == ("idxe|calls|a|0|", "idxe|calls|a|0|")
    assert index.seek("calls", "a", 0, None, 10**13) == ("idxe|calls|a|0|", "idxe|calls|a|0|")
    # A time past 13 digits bounds nothing: it would sort below every hour as text.
    assert index.seek("calls", "a", 0, (10**14, "x"), -5) == ("idxe|calls|a|0|", "idxe|calls|a|0}")
    assert index.seek("calls", "a", 0, (5 * H, "x"), 9 * H) == ("idxe|calls|a|0|0000032400000|",) * 2


ACCOUNT = Account("acct_queries")
NOW = 1_767_225_600_000  # 2026-01-01T00:00:00Z
CALLS = 24


def harness_with_calls() -> Harness:
    """One call an hour for the last CALLS hours; the oldest has source `needle`, the others `hay`."""
    harness = Harness()
    for n in range(CALLS):
        body = {
            "type": "call.started",
            "call_id": f"q-{n:02d}",
            "to": "+14155552671",
            "from": f"+1212555{n:04d}",
            "at": format_ms(NOW - (n + 1) * H),
            "source": "needle" if n == CALLS - 1 else "hay",
        }
        status, _ = harness.post(ACCOUNT, body, NOW)
        assert status == 200
    return harness


def pages(harness: Harness, max_rows: int, limit: int, **filters: Any) -> tuple[list[list[str]], list[int]]:
    """Every page of a listing followed to its end, and the rows each partition's question read."""
    store, read = harness.tables, list[str]()
    scan = counting(store, read)
    reads = queries.Reads(harness.view, harness.calls.get, scan, store.get, scan, scan_max_rows=max_rows)
    seen: list[list[str]] = []
    rows: list[int] = []
    cursor = None
    while True:
        replies = []
        for partition in range(harness.partitions):
            question = CallsList(account_id=ACCOUNT.id, limit=limit, cursor=cursor, **filters)
            before = len(read)
            status, body = queries.answer(question, partition, reads, harness.rules)
            rows.append(len(read) - before)
            replies.append({"status": status, "body": as_sent(body)})
        page = merge_pages(replies, "calls", list[CallEntry], limit)
        seen.append([c["call_id"] for c in page["data"]])
        cursor = page["next_cursor"]
        if cursor is None:
            return seen, rows


def test_a_filter_that_matches_nothing_new_pages_to_the_old_match_within_the_bound() -> None:
    harness = harness_with_calls()
    seen, rows = pages(harness, max_rows=3, limit=200, source="needle")
    assert seen[0] == [] and [p for p in seen if p] == [["q-23"]]
    assert flat(seen) == ["q-23"]
    # One call an hour: no partition's question reads more rows than the bound.
    assert max(rows) == 3


def test_every_call_once_in_order_through_short_pages() -> None:
    harness = harness_with_calls()
    newest_first = [f"q-{n:02d}" for n in range(CALLS)]
    seen, rows = pages(harness, max_rows=2, limit=5)
    assert flat(seen) == newest_first
    assert any(len(p) < 5 for p in seen[:-1]) and max(rows) == 2
    # Without the bound, and with a bound it never reaches: the pages of before.
    unbounded = [newest_first[i : i + 5] for i in range(0, CALLS, 5)]
    assert pages(harness, max_rows=10_000, limit=5)[0] == unbounded


def test_until_and_a_cursor_read_only_the_hours_below_them() -> None:
    harness = harness_with_calls()
    seen, rows = pages(harness, max_rows=10_000, limit=200, until=NOW - 20 * H)
    assert seen == [["q-20", "q-21", "q-22", "q-23"]]
    # The four calls below `until`, each partition's read ending at its index's end: no newer row is read.
    assert sum(rows) == 4
