"""Due times by time: which keys of a sweep table are due, without scanning the table each tick.

A heap of (due, key) mirrors the table's rows as the folds write them; a popped entry whose due time
has since changed is stale and dropped. The heap is rebuilt from the table (one scan) whenever the
worker's assignment changes, since a rebalance or a changelog recovery changes rows behind the folds.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable


class DueIndex:
    def __init__(self) -> None:
        self.heap: list[tuple[int, str]] = []
        self.current: dict[str, int] = {}
        self.built_for: frozenset[object] | None = None

    def rebuild(self, rows: Iterable[tuple[str, int]], assignment: frozenset[object]) -> None:
        self.current = dict(rows)
        self.heap = [(due, key) for key, due in self.current.items()]
        heapq.heapify(self.heap)
        self.built_for = assignment

    def set(self, key: str, due: int | None) -> None:
        if due is None:
            self.current.pop(key, None)
            return
        if self.current.get(key) != due:
            self.current[key] = due
            heapq.heappush(self.heap, (due, key))
            if len(self.heap) > 4 * len(self.current) + 64:
                # Moved due times leave stale entries behind; drop them before they outgrow the rows.
                self.heap = [(d, k) for k, d in self.current.items()]
                heapq.heapify(self.heap)

    def due(self, now: int) -> list[tuple[str, int]]:
        """The keys due at `now` with their due times; they stay due until a fold moves or clears them."""
        found: list[tuple[str, int]] = []
        while self.heap and self.heap[0][0] <= now:
            due, key = heapq.heappop(self.heap)
            if self.current.get(key) == due:
                found.append((key, due))
        for key, due in found:
            heapq.heappush(self.heap, (due, key))
        return found

    def __len__(self) -> int:
        return len(self.current)
