"""A per-account, per-partition index by hour, for listing calls (and alerts) newest first.

Keys carry the partition so every key lives in exactly one partition's store. Call entries are
`[at_ms, call_id, number, caller, action]`, enough to filter without reading each call; alert
entries are `[created_ms, alert_id, type]`. An hour's bucket is rewritten whole on each new entry,
so the bucket is small enough for that to stay cheap on a busy account; the list of buckets is
written only when it gains one.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

BUCKET_MS = 3_600_000

Entry = list[Any]
Lookup = Callable[[str], Any]


def buckets_key(account: str, partition: int, space: str = "calls") -> str:
    return f"buckets|{space}|{account}|{partition}"


def bucket_key(account: str, partition: int, bucket: int, space: str = "calls") -> str:
    return f"idx|{space}|{account}|{partition}|{bucket}"


def additions(read: Lookup, account: str, partition: int, entry: Entry, space: str = "calls") -> dict[str, Any]:
    """The index keys to write for `entry` (its time first, its id second): none when it is already in."""
    at = int(entry[0])
    bucket = at - at % BUCKET_MS
    key = bucket_key(account, partition, bucket, space)
    entries: list[Entry] = read(key) or []
    if any(e[1] == entry[1] for e in entries):
        return {}
    writes: dict[str, Any] = {key: [*entries, entry]}
    known = buckets_key(account, partition, space)
    buckets: list[int] = read(known) or []
    if bucket not in buckets:
        writes[known] = sorted([*buckets, bucket])
    return writes


def newest_first(read: Lookup, account: str, partition: int, space: str = "calls") -> Iterator[tuple[int, list[Entry]]]:
    """Each bucket's start and entries, the newest bucket first."""
    for bucket in reversed(read(buckets_key(account, partition, space)) or []):
        yield bucket, read(bucket_key(account, partition, bucket, space)) or []


@dataclass(frozen=True)
class Filter:
    number: str | None = None
    since: int | None = None
    until: int | None = None
    action: str | None = None
    after: tuple[int, str] | None = None

    def matches(self, entry: Entry) -> bool:
        at, call_id, number, caller, action = entry
        if self.number is not None and self.number not in (number, caller):
            return False
        if self.since is not None and at < self.since:
            return False
        if self.until is not None and at >= self.until:
            return False
        if self.action is not None and action != self.action:
            return False
        return self.after is None or (at, call_id) < self.after


def sort_key(entry: Entry) -> tuple[int, str]:
    return (int(entry[0]), str(entry[1]))


def encode_cursor(entry: Entry) -> str:
    return base64.urlsafe_b64encode(f"{entry[0]}:{entry[1]}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str] | None:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        at, call_id = text.split(":", 1)
        return int(at), call_id
    except (ValueError, UnicodeDecodeError):
        return None
