"""Listing indexes: per account and partition, entries bucketed by hour, read newest first.

Keys carry the partition so every key lives in exactly one partition's store. A call's entry holds
what the listing filters on (number, caller, action, source), so a page reads only the calls it shows.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from domain import keys
from domain.rules import HOUR_MS

BUCKET_MS = HOUR_MS
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
    bucket = entry.at - entry.at % BUCKET_MS
    key = keys.index_bucket(space, account, partition, bucket)
    entries: list[Any] = read(key) or []
    new_id = entry_id(entry)
    if any(e[1] == new_id for e in entries):
        return {}
    writes: dict[str, Any] = {key: [*entries, msgspec.to_builtins(entry)]}
    known = keys.index_buckets(space, account, partition)
    buckets: list[int] = read(known) or []
    if bucket not in buckets:
        writes[known] = sorted([*buckets, bucket])
    return writes


def newest_first(read: Lookup, space: str, account: str, partition: int) -> Iterator[tuple[int, list[Any]]]:
    """Each bucket's start and raw entries, the newest bucket first."""
    for bucket in reversed(read(keys.index_buckets(space, account, partition)) or []):
        yield bucket, read(keys.index_bucket(space, account, partition, bucket)) or []


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
