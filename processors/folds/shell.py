"""The one shell around the domain's folds: every record of a topic through its step, and the sweep tables.

`each_record` is the fold loop of every folded topic: a record's offset is acknowledged once what its
step appended is durable (processors/folds/commits.py); a record the step cannot handle goes to the dead
letters (processors/output/dead_letters.py) and the fold goes on. A step is told whether the record is a
rebuild's replay, whose answers and appends are in the log already.

`Sweeps` is the one writer of a sweep table (a row per call or number: when a rule may trip with no
further event, as the fold's outcome says, `domain.due.Due`) and of its `DueIndex`, and its timer ticks
what is due. The index is a heap of (when, key) mirroring the table's rows as the folds write them: `due`
is the rule's time (event time, the tick's), `when` the edge's time from which the tick may go out. A
popped entry whose times have since changed is stale and dropped. The heap is rebuilt from the table
(one scan) whenever the worker's assignment changes, since a rebalance or a changelog recovery changes
rows behind the folds.
"""

from __future__ import annotations

import heapq
from collections.abc import Awaitable, Callable, Iterable

from domain.due import Due
from processors.faust.feed import Fed, Feed
from processors.folds.commits import Room
from processors.folds.parts import Parts
from processors.output.appender import Ack
from processors.output.dead_letters import POISON

# What a fold's step is given: the record, the list for the acks of what it appends, and whether the record
# is a replay (folded before).
Record = Fed
Pending = list[Ack]
Step = Callable[[Record, Pending, bool], Awaitable[None]]


def each_record(w: Parts, name: str, step: Step, room: Room | None = None) -> None:
    """Fold every record of topic `name` with `step`, taking `room` (the folds' shared one by default)."""

    @w.fold(name)
    async def fold(feed: Feed) -> None:
        async for record, pending in w.commits.folds(feed, name, room):
            replay = w.progress.folded(name, record)
            try:
                await step(record, pending, replay)
            except POISON as error:
                await w.dead_letters.put(name, record, error, pending)


class Sweeps:
    """The sweep table `table` of the rows the folds of topic `source` write, and its timer."""

    def __init__(self, w: Parts, table: str, source: str, tick_after: Callable[[str, int], int]) -> None:
        self.w = w
        self.table = table
        self.source = source
        # A row's `Due.tick_after`, from the row it belongs to: the index is rebuilt from the table alone.
        self.tick_after = tick_after
        self.index = DueIndex()
        w.tables.table(table)

    def write(self, key: str, due: Due | None) -> None:
        """`key` due as its fold's outcome says; None: not due."""
        at = None if due is None else due.at
        self.index.set(key, at, None if due is None else due.tick_after)
        if self.w.tables.get(self.table, key, int) != at:
            if at is None:
                self.w.tables.delete(self.table, key)
            else:
                self.w.tables.put(self.table, key, at)

    def forget(self, key: str) -> None:
        """`key` left the tables (past the hot-table horizon)."""
        self.w.tables.delete(self.table, key)
        self.index.set(key, None)

    def every(self, interval_s: float, tick: Callable[[str, int], Awaitable[None]]) -> None:
        """Every `interval_s`, `tick(key, due)` for each key due by the sweeps' clock."""
        w = self.w

        @w.app.timer(interval_s, on_leader=False, name=f"sweep of {self.table}")
        async def sweep() -> None:
            if w.app.consumer is None or w.app.rebalancing or not await w.progress.replay_done(self.source):
                return
            # The table holds the partitions this worker holds.
            self.index.built(
                frozenset(w.app.consumer.assignment()),
                lambda: ((key, due, self.tick_after(key, due)) for key, due in w.tables.due_times(self.table)),
            )
            for key, due in self.index.to_tick(w.sweep_clock()):
                await tick(key, due)


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
