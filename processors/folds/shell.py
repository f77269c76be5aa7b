"""Due times by time: which keys of a sweep table are due, without scanning the table each tick.

A heap of (when, key) mirrors the table's rows as the folds write them: `due` is the rule's time (event
time, the tick's), `when` the edge's time from which the tick may go out (`domain.calls.tick_after`,
`domain.detectors.tick_after`). A popped entry whose times have since changed is stale and dropped. The
heap is rebuilt from the table (one scan) whenever the worker's assignment changes, since a rebalance or
a changelog recovery changes rows behind the folds.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable

# A key still due is ticked again no sooner than this (the edge's clock): its fold may not have run yet.
TICK_REPEAT_MS = 5000


class DueIndex:
    def __init__(self) -> None:
        self.heap: list[tuple[int, str]] = []
        # Each key's (due, when).
        self.current: dict[str, tuple[int, int]] = {}
        self.built_for: frozenset[object] | None = None
        # When each key was last handed out by `to_tick`.
        self._ticked: dict[str, int] = {}

    def built(self, assignment: frozenset[object], rows: Callable[[], Iterable[tuple[str, int, int]]]) -> None:
        """Rebuilt from the table's `rows` when the worker's assignment is not the one it was built for."""
        if self.built_for != assignment:
            self.rebuild(rows(), assignment)

    def rebuild(self, rows: Iterable[tuple[str, int, int]], assignment: frozenset[object]) -> None:
        """From every (key, due, when) the table holds."""
        self.current = {key: (due, when) for key, due, when in rows}
        self.heap = [(when, key) for key, (_, when) in self.current.items()]
        heapq.heapify(self.heap)
        self.built_for = assignment

    def set(self, key: str, due: int | None, when: int | None = None) -> None:
        """`key` due at `due`, to tick from `when` (`due` when not given); None clears it."""
        if due is None:
            self.current.pop(key, None)
            return
        entry = (due, due if when is None else when)
        if self.current.get(key) != entry:
            self.current[key] = entry
            heapq.heappush(self.heap, (entry[1], key))
            if len(self.heap) > 4 * len(self.current) + 64:
                # Moved due times leave stale entries behind; drop them before they outgrow the rows.
                self.heap = [(w, k) for k, (_, w) in self.current.items()]
                heapq.heapify(self.heap)

    def due(self, now: int) -> list[tuple[str, int]]:
        """The keys to tick at `now` with their due times; they stay due until a fold moves or clears them."""
        found: list[tuple[str, int]] = []
        while self.heap and self.heap[0][0] <= now:
            when, key = heapq.heappop(self.heap)
            entry = self.current.get(key)
            if entry is not None and entry[1] == when:
                found.append((key, entry[0]))
        for key, _ in found:
            heapq.heappush(self.heap, (self.current[key][1], key))
        return found

    def to_tick(self, now: int) -> list[tuple[str, int]]:
        """The keys due at `now` with their due times, less those handed out within `TICK_REPEAT_MS`."""
        for gone in self._ticked.keys() - self.current.keys():
            del self._ticked[gone]
        found = []
        for key, due in self.due(now):
            if now - self._ticked.get(key, 0) < TICK_REPEAT_MS:
                continue
            self._ticked[key] = now
            found.append((key, due))
        return found

    def __len__(self) -> int:
        return len(self.current)
