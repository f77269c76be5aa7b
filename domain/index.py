"""Listing indexes: per account and partition, entries bucketed by hour, read newest first.

Keys carry the partition so every key lives in exactly one partition's store. A call's entry holds
what the listing filters on (number, caller, action, source), so a page reads only the calls it shows.
An hour's entries sit in pages of `PAGE` under keys of their own, so adding one writes a page, a count
and a marker, never a value that grows with the traffic; the list of days is cut at `HORIZON_DAYS`
(older records stay in the log and the call table, out of the listing).
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
HORIZON_DAYS = 400
Lookup = Callable[[str], Any]


class CallEntry(msgspec.Struct, frozen=True, array_like=True):
    at: int
    call_id: str
    number: str
    caller: str
    action: str
    source: str = "api"


class AlertEntry(msgspec.Struct, frozen=True, array_like=True):
    at: int
    alert_id: str
    type: str


Entry = CallEntry | AlertEntry


def entry_id(entry: Entry) -> str:
    return entry.call_id if isinstance(entry, CallEntry) else entry.alert_id


def additions(read: Lookup, space: str, account: str, partition: int, entry: Entry) -> dict[str, Any]:
    """The index keys to write for `entry`: none when it is already in."""
    member = keys.index_member(space, account, partition, entry_id(entry))
    marked = read(member)
    if marked is not None and listed(read, space, account, partition, int(marked), entry_id(entry)):
        return {}
    hour = entry.at - entry.at % BUCKET_MS
    count_key = keys.index_count(space, account, partition, hour)
    count: int = read(count_key) or 0
    page_key = keys.index_page(space, account, partition, hour, count // PAGE)
    writes: dict[str, Any] = {
        page_key: [*(read(page_key) or []), msgspec.to_builtins(entry)],
        count_key: count + 1,
        member: hour,
    }
    day = hour - hour % DAY_MS
    hours_key = keys.index_hours(space, account, partition, day)
    hours: list[int] = read(hours_key) or []
    if hour not in hours:
        writes[hours_key] = sorted([*hours, hour])
        days_key = keys.index_days(space, account, partition)
        days: list[int] = read(days_key) or []
        if day not in days:
            writes[days_key] = sorted([*days, day])[-HORIZON_DAYS:]
    return writes


def listed(read: Lookup, space: str, account: str, partition: int, hour: int, item_id: str) -> bool:
    """Whether an hour's pages hold the entry. A marker without its entry is left by a fold that ran
    again after a kill: its table was recovered from a changelog older than the marker written after it."""
    count = read(keys.index_count(space, account, partition, hour)) or 0
    pages = (
        read(keys.index_page(space, account, partition, hour, page)) or [] for page in range((count + PAGE - 1) // PAGE)
    )
    return any(raw[1] == item_id for entries in pages for raw in entries)


def newest_first(read: Lookup, space: str, account: str, partition: int) -> Iterator[tuple[int, list[Any]]]:
    """Each hour's start and raw entries, the newest hour first."""
    for day in reversed(read(keys.index_days(space, account, partition)) or []):
        for hour in reversed(read(keys.index_hours(space, account, partition, day)) or []):
            count = read(keys.index_count(space, account, partition, hour)) or 0
            entries: list[Any] = []
            for page in range((count + PAGE - 1) // PAGE):
                entries += read(keys.index_page(space, account, partition, hour, page)) or []
            yield hour, entries


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
