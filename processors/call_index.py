"""A per-account, per-partition index by day, for listing calls (and alerts) newest first.

Keys carry the partition so every key lives in exactly one partition's store. Call entries are
`[at_ms, call_id, number, caller, action]`, enough to filter without reading each call; alert
entries are `[created_ms, alert_id, type]`.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

DAY_MS = 86_400_000

Entry = list[Any]


def days_key(account: str, partition: int, space: str = "calls") -> str:
    return f"days|{space}|{account}|{partition}"


def day_key(account: str, partition: int, day: int, space: str = "calls") -> str:
    return f"idx|{space}|{account}|{partition}|{day}"


def with_day(days: list[int], at: int) -> list[int]:
    day = at - at % DAY_MS
    return days if day in days else sorted([*days, day])


def with_entry(entries: list[Entry], entry: Entry) -> list[Entry]:
    if any(e[1] == entry[1] for e in entries):
        return entries
    return [*entries, entry]


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
