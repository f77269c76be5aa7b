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


def track(read: Lookup, space: str, account: str, partition: int, at: int) -> dict[str, Any]:
    """The writes that note `account` has `space` records on `at`'s day in `partition` (none when noted).

    The day's entry alone decides: one whose day a kill left out of the lists (`index.additions`) leaves
    that day in the tables past the horizon, which changes no answer, where checking the lists on every
    record would cost two reads more."""
    day = at - at % DAY_MS
    name = keys.account_day(account, day)
    hot = hot_space(space)
    if read(keys.index_entry(hot, "", partition, day, name)) is not None:
        return {}
    return index.additions(read, hot, "", partition, index.DayEntry(day, name))


def cut(at: int, hot_days: int) -> int:
    """The first day still hot at `at`: the records of the days before it leave."""
    return at - at % DAY_MS - hot_days * DAY_MS


def days_key(space: str, partition: int) -> str:
    """The key of the days on which `partition` has `space` records, oldest first."""
    return keys.index_days(hot_space(space), "", partition)


def oldest_day(read: Lookup, space: str, partition: int) -> int | None:
    """The oldest day on which `partition` has `space` records, None when it has none: `evict` takes
    nothing out while it is not before `cut`."""
    days: list[int] = read(days_key(space, partition)) or []
    return days[0] if days else None


def evict(read: Lookup, scan: Scan, space: str, partition: int, at: int, hot_days: int) -> Eviction | None:
    """One account's day of `space` records in `partition` that is past the horizon at `at`, if any."""
    hot = hot_space(space)
    days: list[int] = read(days_key(space, partition)) or []
    if not days or days[0] >= cut(at, hot_days):
        return None
    # A day entry's hour is its day's start.
    raw, writes = index.pop_first(read, scan, hot, "", partition, days[0])
    if raw is None:
        return Eviction("", [], writes)
    account, day = keys.split_account_day(str(raw[1]))
    entries, dropped = index.drop_day(read, scan, space, account, partition, day)
    return Eviction(account, [str(entry[1]) for entry in entries], {**writes, **dropped})
