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
# Hours are written in 13 digits (`keys.index_hour`): a time past them bounds no range.
HOUR_LIMIT = 10**13
Lookup = Callable[[str], Any]
# Where an entry sorts in a listing, newest last: (at, id). A cursor is one.
Position = tuple[int, str]


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
    return iter(Hours(scan, *keys.index_range(space, account, partition)))


def seek(space: str, account: str, partition: int, before: Position | None, since: int | None) -> tuple[str, str]:
    """The keys a listing reads: the hours that can hold an entry older than `before` (a sort position)
    and not older than `since`, so that neither a deep cursor nor a narrow window reads the hours past it."""
    low, high = keys.index_range(space, account, partition)
    if since is not None and since > 0:
        if since >= HOUR_LIMIT:
            return low, low
        low = keys.index_hour(space, account, partition, since - since % BUCKET_MS)
    if before is not None:
        at, item_id = before
        # Nothing sorts before (at, ""): the newest entry below it is at `at - 1`.
        newest = at if item_id else at - 1
        if newest < 0:
            return low, low
        if newest < HOUR_LIMIT - BUCKET_MS:
            high = keys.index_hour(space, account, partition, newest - newest % BUCKET_MS + BUCKET_MS)
    return low, max(low, high)


class Hours:
    """The hours of the index keys in [low, high), newest first, as `newest_first` reads them, reading at
    most `max_rows` rows (None: no bound) once the first hour is whole.

    Within an hour the keys are in id order, not time order, so only a whole hour says which entries sort
    after a point: at the bound the hour being read is dropped, and `stop` is the start of the last hour
    handed over (as a sort position, `(hour, "")`): every entry from there up to `high` was handed over, and
    none below it. The first hour is always read whole, however large, so each read moves on."""

    def __init__(self, scan: Scan, low: str, high: str, max_rows: int | None = None) -> None:
        self.scan = scan
        self.low = low
        self.high = high
        self.max_rows = max_rows
        self.stop: Position | None = None
        self.read = 0

    def __iter__(self) -> Iterator[tuple[int, list[Any]]]:
        hour: int | None = None
        done: int | None = None
        entries: list[Any] = []
        rows = self.scan(self.low, self.high, backwards=True)
        while True:
            if done is not None and self.max_rows is not None and self.read >= self.max_rows:
                # The hour under way (at least the row that ended `done`) may hold more: left for the next read.
                self.stop = (done, "")
                return
            row = next(rows, None)
            if row is None:
                break
            self.read += 1
            raw = row[1]
            # Every entry type's first field is its time (array_like structs).
            at = raw[0] - raw[0] % BUCKET_MS
            if at != hour:
                if hour is not None:
                    yield hour, entries[::-1]
                    done = hour
                hour, entries = at, []
            entries.append(raw)
        if hour is not None:
            yield hour, entries[::-1]


def page_of(entries: list[Entry], stops: list[Position], limit: int) -> tuple[list[Entry], Position | None]:
    """One page, newest first, from every partition's best `limit + 1` entries, and the sort position the
    next page starts below (None on the last page).

    A partition that stopped early (`Hours.stop`) read everything from its stop up and nothing below it, so
    the page holds only entries at or after the newest stop and, when that leaves it short (even empty),
    the next page starts at that stop: no entry is skipped, however few this page holds."""
    ordered = sorted(entries, key=sort_key, reverse=True)
    stop = max(stops, default=None)
    if stop is not None:
        ordered = [e for e in ordered if sort_key(e) >= stop]
    page = ordered[:limit]
    if len(ordered) > limit:
        return page, sort_key(page[-1])
    return page, stop


@dataclass(frozen=True)
class CallFilter:
    number: str | None = None
    since: int | None = None
    until: int | None = None
    action: str | None = None
    source: str | None = None
    after: Position | None = None

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


def sort_key(entry: Entry) -> Position:
    return (entry.at, entry_id(entry))


def encode_cursor(entry: Entry | Position) -> str:
    at, item_id = entry if isinstance(entry, tuple) else sort_key(entry)
    return base64.urlsafe_b64encode(f"{at}:{item_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> Position | None:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        at, item_id = text.split(":", 1)
        return int(at), item_id
    except (ValueError, UnicodeDecodeError):
        return None
