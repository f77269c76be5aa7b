"""The hot-table horizon: a call or an alert leaves the worker's tables `hot_days` after its day.

The log keeps it; only the tables forget. Each partition notes, in an index of its own, which accounts
have records on which day. A fold at event time `at` takes out at most one account's day older than
`at`'s day minus `hot_days`, so the work per fold stays bounded, and a replay takes out the same
records at the same events (the time is the events', never the clock). docs/api.md, "Retention".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from domain import index, keys
from domain.index import Lookup, Scan
from domain.rules import DAY_MS


@dataclass(frozen=True)
class Eviction:
    account: str
    # The ids (call ids or alert ids) of the records that leave.
    items: list[str]
    # Index writes; None deletes the key.
    writes: dict[str, Any]


def hot_space(space: str) -> str:
    return f"hot-{space}"


def day_of(at: int) -> int:
    return at - at % DAY_MS


def track(read: Lookup, space: str, account: str, partition: int, at: int) -> dict[str, Any]:
    """The write that notes `account` has `space` records on `at`'s day in `partition` (none when noted)."""
    day = day_of(at)
    return index.additions(read, hot_space(space), "", partition, index.DayEntry(day, keys.account_day(account, day)))


def cut(at: int, hot_days: int) -> int:
    """The first day still hot at `at`: the records of the days before it leave."""
    return day_of(at) - hot_days * DAY_MS


def oldest_day(scan: Scan, space: str, partition: int) -> int | None:
    """The oldest day on which `partition` has `space` records, None when it has none: `evict` takes
    nothing out while it is not before `cut`."""
    found = index.first(scan, hot_space(space), "", partition)
    return None if found is None else int(found[1][0])


def evict(scan: Scan, space: str, partition: int, at: int, hot_days: int) -> Eviction | None:
    """One account's day of `space` records in `partition` that is past the horizon at `at`, if any."""
    found = index.first(scan, hot_space(space), "", partition)
    if found is None or found[1][0] >= cut(at, hot_days):
        return None
    key, raw = found
    account, day = keys.split_account_day(str(raw[1]))
    entries, dropped = index.drop_day(scan, space, account, partition, day)
    return Eviction(account, [str(entry[1]) for entry in entries], {key: None, **dropped})
