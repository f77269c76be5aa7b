"""Listing indexes: per account and partition, entries bucketed by hour, read newest first.

Keys carry the partition so every key lives in exactly one partition's store. Each entry is a key of
its own under its hour (`keys.index_entry`), holding what the listing filters on (number, caller,
action, source), so adding one writes that key and nothing that grows with the traffic, and a page of
the listing reads only the hours it shows, each as one range of keys. A list of the hours each day has
and of the days say where the ranges are. A day leaves the index with its records at the hot-table
horizon (`domain.horizon`), which bounds the list of days.
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
Lookup = Callable[[str], Any]
# Every (key, value) with low <= key < high, in key order.
Scan = Callable[[str, str], Iterator[tuple[str, Any]]]


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
    """The index keys to write for `entry`: none when it is in.

    After a kill, each key comes back from the changelog or from the worker's own store, whichever is
    newer, so an entry can come back without its hour or its day in the lists: every addition checks
    them again.
    """
    hour = entry.at - entry.at % BUCKET_MS
    writes: dict[str, Any] = {}
    key = keys.index_entry(space, account, partition, hour, entry_id(entry))
    if read(key) is None:
        writes[key] = msgspec.to_builtins(entry)
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


def hour_range(space: str, account: str, partition: int, hour: int, hours: int = 1) -> tuple[str, str]:
    """The keys of the entries of `hours` hours from `hour`, as a (low, high) range."""
    low = keys.index_hour(space, account, partition, hour)
    return low, keys.index_hour(space, account, partition, hour + hours * BUCKET_MS)


def pop_first(
    read: Lookup, scan: Scan, space: str, account: str, partition: int, hour: int
) -> tuple[Any, dict[str, Any]]:
    """An hour's first raw entry in key order (None when it has none) and the writes that take it out, and
    the hour with it once empty (None deletes a key). Reads two entries at most, however many the hour has."""
    entries = scan(*hour_range(space, account, partition, hour))
    first = next(entries, None)
    if first is None:
        return None, _without_hour(read, space, account, partition, hour)
    key, raw = first
    writes: dict[str, Any] = {key: None}
    if next(entries, None) is None:
        writes.update(_without_hour(read, space, account, partition, hour))
    return raw, writes


def drop_day(
    read: Lookup, scan: Scan, space: str, account: str, partition: int, day: int
) -> tuple[list[Any], dict[str, Any]]:
    """An account's raw entries of one day and the writes that take the day out of its index (None deletes)."""
    entries: list[Any] = []
    writes: dict[str, Any] = {}
    for key, raw in scan(*hour_range(space, account, partition, day, DAY_MS // BUCKET_MS)):
        entries.append(raw)
        writes[key] = None
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


def newest_first(read: Lookup, scan: Scan, space: str, account: str, partition: int) -> Iterator[tuple[int, list[Any]]]:
    """Each hour's start and raw entries, the newest hour first."""
    for day in reversed(read(keys.index_days(space, account, partition)) or []):
        for hour in reversed(read(keys.index_hours(space, account, partition, day)) or []):
            yield hour, [raw for _, raw in scan(*hour_range(space, account, partition, hour))]


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
