"""Listing indexes: per account and partition, entries bucketed by hour, read newest first.

Keys carry the partition so every key lives in exactly one partition's store. A call's entry holds
what the listing filters on (number, caller, action, source), so a page reads only the calls it shows.
An hour's entries sit in pages of `PAGE` under keys of their own, so adding one writes a page, a count
and a marker, never a value that grows with the traffic. A day leaves the index with its records at the
hot-table horizon (`domain.horizon`), which bounds the list of days.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from domain import keys
from domain.rules import DAY_MS, HOUR_MS

BUCKET_MS = HOUR_MS
PAGE = 64
Lookup = Callable[[str], Any]


class CallEntry(msgspec.Struct, frozen=True, array_like=True, gc=False):
    at: int
    call_id: str
    number: str
    caller: str
    action: str
    source: str = "api"


class AlertEntry(msgspec.Struct, frozen=True, array_like=True, gc=False):
    at: int
    alert_id: str
    type: str


class DayEntry(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """An account that has records on a day, for the horizon's index: `at` is the day's start and
    `name` is `keys.account_day` (an entry's second field is its id)."""

    at: int
    name: str


Entry = CallEntry | AlertEntry | DayEntry


def entry_id(entry: Entry) -> str:
    if isinstance(entry, CallEntry):
        return entry.call_id
    if isinstance(entry, AlertEntry):
        return entry.alert_id
    return entry.name


def additions(read: Lookup, space: str, account: str, partition: int, entry: Entry) -> dict[str, Any]:
    """The index keys to write for `entry`: none when it is already in.

    After a kill, each key comes back from the changelog or from the worker's own store, whichever is
    newer, so an hour's keys can disagree: a marker without its entry, a count behind its pages. The pages
    are the truth: an entry is looked for in them, and the count is raised to cover every page that exists.
    """
    item = entry_id(entry)
    hour = entry.at - entry.at % BUCKET_MS
    member = keys.index_member(space, account, partition, item)
    marked = read(member) is not None
    count_key = keys.index_count(space, account, partition, hour)
    count: int = read(count_key) or 0
    # Unmarked, the entry can only be on the newest page (a flush that lost its marker record), which is
    # the one holding the count's last entry or one after it.
    first = 0 if marked else max(0, (count - 1) // PAGE)
    pages = dict(_pages(read, space, account, partition, hour, count, first))
    last = max(pages, default=first)
    writes: dict[str, Any] = {}
    if any(raw[1] == item for entries in pages.values() for raw in entries):
        covered = last * PAGE + len(pages.get(last, []))
    else:
        page = pages.get(last, [])
        last, page = (last, page) if len(page) < PAGE else (last + 1, [])
        page = [*page, msgspec.to_builtins(entry)]
        writes[keys.index_page(space, account, partition, hour, last)] = page
        covered = last * PAGE + len(page)
    if covered > count:
        writes[count_key] = covered
    if not marked:
        writes[member] = hour
    day = hour - hour % DAY_MS
    hours_key = keys.index_hours(space, account, partition, day)
    hours: list[int] = read(hours_key) or []
    if hour not in hours:
        writes[hours_key] = sorted([*hours, hour])
    days_key = keys.index_days(space, account, partition)
    days: list[int] = read(days_key) or []
    if day not in days:
        writes[days_key] = sorted([*days, day])
    return writes


def pop_newest(read: Lookup, space: str, account: str, partition: int, hour: int) -> tuple[Any, dict[str, Any]]:
    """An hour's newest raw entry (None when it has none) and the writes that take it out, and the hour
    with it once empty (None deletes a key)."""
    count_key = keys.index_count(space, account, partition, hour)
    pages = [
        (number, page) for number, page in _pages(read, space, account, partition, hour, read(count_key) or 0) if page
    ]
    if not pages:
        return None, {count_key: None, **_without_hour(read, space, account, partition, hour)}
    number, page = pages[-1]
    raw, rest = page[-1], page[:-1]
    writes: dict[str, Any] = {
        keys.index_page(space, account, partition, hour, number): rest or None,
        keys.index_member(space, account, partition, str(raw[1])): None,
        count_key: number * PAGE + len(rest) or None,
    }
    if len(pages) == 1 and not rest:
        writes.update(_without_hour(read, space, account, partition, hour))
    return raw, writes


def drop_day(read: Lookup, space: str, account: str, partition: int, day: int) -> tuple[list[Any], dict[str, Any]]:
    """An account's raw entries of one day and the writes that take the day out of its index (None deletes)."""
    entries: list[Any] = []
    writes: dict[str, Any] = {}
    for hour in read(keys.index_hours(space, account, partition, day)) or []:
        count_key = keys.index_count(space, account, partition, hour)
        for number, page in _pages(read, space, account, partition, hour, read(count_key) or 0):
            entries += page
            writes[keys.index_page(space, account, partition, hour, number)] = None
        writes[count_key] = None
    for raw in entries:
        writes[keys.index_member(space, account, partition, str(raw[1]))] = None
    writes[keys.index_hours(space, account, partition, day)] = None
    writes.update(_without_day(read, space, account, partition, day))
    return entries, writes


def _without_hour(read: Lookup, space: str, account: str, partition: int, hour: int) -> dict[str, Any]:
    day = hour - hour % DAY_MS
    hours_key = keys.index_hours(space, account, partition, day)
    hours = [h for h in read(hours_key) or [] if h != hour]
    if hours:
        return {hours_key: hours}
    return {hours_key: None, **_without_day(read, space, account, partition, day)}


def _without_day(read: Lookup, space: str, account: str, partition: int, day: int) -> dict[str, Any]:
    days_key = keys.index_days(space, account, partition)
    days: list[int] = read(days_key) or []
    if day not in days:
        return {}
    return {days_key: [d for d in days if d != day] or None}


def _pages(
    read: Lookup, space: str, account: str, partition: int, hour: int, count: int, first: int = 0
) -> Iterator[tuple[int, list[Any]]]:
    """An hour's pages from `first`: every page its count covers, then any written after the count was."""
    number = first
    while True:
        page = read(keys.index_page(space, account, partition, hour, number))
        if page is None and number * PAGE >= count:
            return
        yield number, page or []
        number += 1


def newest_first(read: Lookup, space: str, account: str, partition: int) -> Iterator[tuple[int, list[Any]]]:
    """Each hour's start and raw entries, the newest hour first."""
    for day in reversed(read(keys.index_days(space, account, partition)) or []):
        for hour in reversed(read(keys.index_hours(space, account, partition, day)) or []):
            count = read(keys.index_count(space, account, partition, hour)) or 0
            pages = _pages(read, space, account, partition, hour, count)
            yield hour, [raw for _, entries in pages for raw in entries]


@dataclass(frozen=True)
class CallFilter:
    number: str | None = None
    since: int | None = None
    until: int | None = None
    action: str | None = None
    source: str | None = None
    after: tuple[int, str] | None = None

    def matches(self, entry: CallEntry) -> bool:
        if self.number is not None and self.number not in (entry.number, entry.caller):
            return False
        if self.since is not None and entry.at < self.since:
            return False
        if self.until is not None and entry.at >= self.until:
            return False
        if self.action is not None and entry.action != self.action:
            return False
        if self.source is not None and entry.source != self.source:
            return False
        return self.after is None or (entry.at, entry.call_id) < self.after


def sort_key(entry: Entry) -> tuple[int, str]:
    return (entry.at, entry_id(entry))


def encode_cursor(entry: Entry) -> str:
    return base64.urlsafe_b64encode(f"{entry.at}:{entry_id(entry)}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str] | None:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        at, item_id = text.split(":", 1)
        return int(at), item_id
    except (ValueError, UnicodeDecodeError):
        return None
