"""Keys seen before, within a bound, for a check that must never say "new" twice (at most once).

The alerting role asks, for each alert it reads, whether any delivery record of it exists (and of each of its
messages, and of its hang-up). A set of every id ever seen grows with every alert. Here each key carries its
event time (the alert's `created_at`), at most `size` keys are kept, and past that the oldest by event time is
forgotten and raises the `floor` to its time. A key at or below the floor counts as seen whether it is kept or
not: forgetting can only turn a new key into a seen one, never a seen key into a new one, so nothing is done
twice. What the bound costs is that a key first met at or below the floor, an alert older than every one kept,
is taken as handled (`stale`): with the default size that is an alert older than the last 100,000.

Event time only: the same keys in the same order give the same answers, whenever they are read.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class Seen(Generic[K]):
    """At most `size` keys with their event times; a key at or below `floor` counts as seen."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("size must be at least 1")
        self.size = size
        # The event time of the newest key forgotten: nothing at or below it is new.
        self.floor: int | None = None
        self._at: dict[K, int] = {}
        # (event time, arrival, key), the oldest first; the arrival breaks ties without comparing keys.
        self._heap: list[tuple[int, int, K]] = []
        self._arrivals = itertools.count()

    def seen(self, key: K, at: int) -> bool:
        """Whether `key` (of event time `at`) was added before, or is as old as a key forgotten."""
        return key in self._at or self.stale(at)

    def stale(self, at: int) -> bool:
        """Whether event time `at` is at or below the floor: a key of that time may have been forgotten."""
        return self.floor is not None and at <= self.floor

    def add(self, key: K, at: int) -> None:
        """Remember `key` at event time `at` (a key kept already keeps its first time); past `size`, forget
        the oldest. A key at or below the floor is not kept: it counts as seen already."""
        if key in self._at or self.stale(at):
            return
        self._at[key] = at
        heapq.heappush(self._heap, (at, next(self._arrivals), key))
        while len(self._at) > self.size:
            oldest, _, gone = heapq.heappop(self._heap)
            del self._at[gone]
            self.floor = oldest if self.floor is None else max(self.floor, oldest)

    def __len__(self) -> int:
        return len(self._at)

    def __contains__(self, key: object) -> bool:
        """Whether `key` is kept (not whether it counts as seen: that needs its time, `seen`)."""
        return key in self._at
