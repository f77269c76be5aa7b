"""Fair scheduling of work that belongs to accounts (docs/api.md, Alert delivery).

Each account has its own FIFO queue, bounded; accounts are served round-robin, each with at most
`per_key` items in flight and all of them together at most `total`. An account with a slow receiver
or a flood of alerts therefore fills its own queue and its own slots, never another account's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class FairQueues(Generic[T]):
    """Per-key bounded queues, served round-robin under a per-key and a total concurrency cap."""

    def __init__(self, total: int, per_key: int, limit: int) -> None:
        if min(total, per_key, limit) < 1:
            raise ValueError("total, per_key and limit must each be at least 1")
        self.total = total
        self.per_key = per_key
        self.limit = limit
        self.queues: dict[str, deque[T]] = {}
        self.running: dict[str, int] = {}
        self.busy = 0
        # Keys with something queued, in the order they are next served.
        self.turns: deque[str] = deque()

    def room(self, key: str) -> bool:
        """Whether `key`'s queue takes one more item."""
        return len(self.queues.get(key, ())) < self.limit

    def offer(self, key: str, item: T) -> bool:
        """Queue `item` behind `key`'s others; False (and nothing queued) when the queue is full."""
        if not self.room(key):
            return False
        queue = self.queues.setdefault(key, deque())
        if not queue:
            self.turns.append(key)
        queue.append(item)
        return True

    def next(self) -> tuple[str, T] | None:
        """The next item to start, from the first key in turn that has a free slot; None when nothing may start.

        The item counts as in flight until `done(key)`.
        """
        if self.busy >= self.total:
            return None
        for _ in range(len(self.turns)):
            key = self.turns.popleft()
            if self.running.get(key, 0) >= self.per_key:
                self.turns.append(key)
                continue
            queue = self.queues[key]
            item = queue.popleft()
            if queue:
                self.turns.append(key)
            else:
                del self.queues[key]
            self.running[key] = self.running.get(key, 0) + 1
            self.busy += 1
            return key, item
        return None

    def done(self, key: str) -> None:
        """One of `key`'s items finished: its slot is free again."""
        left = self.running[key] - 1
        self.busy -= 1
        if left:
            self.running[key] = left
        else:
            del self.running[key]

    def drop(self, unwanted: Callable[[T], bool]) -> list[T]:
        """Remove every queued item (none in flight) for which `unwanted` is true, and return them."""
        dropped: list[T] = []
        for key in list(self.queues):
            kept = deque(item for item in self.queues[key] if not unwanted(item))
            dropped += [item for item in self.queues[key] if unwanted(item)]
            if kept:
                self.queues[key] = kept
            else:
                del self.queues[key]
                self.turns.remove(key)
        return dropped

    def queued(self, key: str) -> int:
        return len(self.queues.get(key, ()))

    def in_flight(self, key: str) -> int:
        return self.running.get(key, 0)
