"""Listing indexes: per account and partition, entries bucketed by hour, read newest first.

Keys carry the partition so every key lives in exactly one partition's store. Each entry is a key of
its own under its hour (`keys.index_entry`), holding what the listing filters on (number, caller,
action, source). The entries are the whole index: adding one writes that key and nothing else, a page
of the listing reads the account's keys backwards from the newest and stops when it is full, and the
horizon (`domain.horizon`) finds the oldest day as the first key of its own index. There is no list of
hours or days to keep beside the entries, so no list to rewrite for each new hour, and none for a kill
to leave behind its entries.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from domain import keys
from domain.rules import DAY_MS, HOUR_MS

BUCKET_MS = HOUR_MS
Lookup = Callable[[str], Any]


class Scan(Protocol):
    def __call__(self, low: str, high: str, backwards: bool = False) -> Iterator[tuple[str, Any]]:
        """Every (key, value) with low <= key < high, in key order, or the reverse of it."""


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
    """The index key to write for `entry`: none when it is in (a refold)."""
    key = keys.index_entry(space, account, partition, entry.at - entry.at % BUCKET_MS, entry_id(entry))
    return {} if read(key) is not None else {key: msgspec.to_builtins(entry)}


def hour_range(space: str, account: str, partition: int, hour: int, hours: int = 1) -> tuple[str, str]:
    """The keys of the entries of `hours` hours from `hour`, as a (low, high) range."""
    low = keys.index_hour(space, account, partition, hour)
    return low, keys.index_hour(space, account, partition, hour + hours * BUCKET_MS)


def first(scan: Scan, space: str, account: str, partition: int) -> tuple[str, Any] | None:
    """The key and raw value of the oldest entry, None when the index has none: one seek."""
    return next(scan(*keys.index_range(space, account, partition)), None)


def drop_day(scan: Scan, space: str, account: str, partition: int, day: int) -> tuple[list[Any], dict[str, Any]]:
    """An account's raw entries of one day and the writes that take them out of its index (None deletes)."""
    entries: list[Any] = []
    writes: dict[str, Any] = {}
    for key, raw in scan(*hour_range(space, account, partition, day, DAY_MS // BUCKET_MS)):
        entries.append(raw)
        writes[key] = None
    return entries, writes


def newest_first(scan: Scan, space: str, account: str, partition: int) -> Iterator[tuple[int, list[Any]]]:
    """Each hour's start and raw entries (in key order), the newest hour first; read as the caller goes."""
    hour: int | None = None
    entries: list[Any] = []
    for _, raw in scan(*keys.index_range(space, account, partition), backwards=True):
        # Every entry type's first field is its time (array_like structs).
        at = raw[0] - raw[0] % BUCKET_MS
        if at != hour:
            if hour is not None:
                yield hour, entries[::-1]
            hour, entries = at, []
        entries.append(raw)
    if hour is not None:
        yield hour, entries[::-1]


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
