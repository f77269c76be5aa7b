"""When the worker takes fetched records for lost (`Commits._refetch_lost_tails`): only when two checks in a row
find its consumer's position past the fold's next record with the fold idle.

The consumer here is a stand-in that answers `position` and records `seek`: the rule is about what the
commits bookkeeping does with those answers, not about the broker (tests/hostile/test_fault_kills.py
covers a real lost tail on a real broker).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, cast

from faust.types import TP

from processors.folds.commits import LOST_AFTER_S, Commits

TOPIC = "t.decisions"
PART = TP(TOPIC, 0)


@dataclass
class Consumer:
    at: int
    sought: list[int] = field(default_factory=list)

    def assignment(self) -> set[TP]:
        return {PART}

    async def position(self, tp: TP) -> int:
        return self.at

    async def seek(self, tp: TP, offset: int) -> None:
        self.sought.append(offset)


@dataclass
class Feed:
    idle_since: float | None


@dataclass
class App:
    consumer: Consumer
    rebalancing: bool = False


def commits_over(consumer: Consumer, next_record: int, idle: bool = True) -> Commits:
    unused: Any = None  # tables, view store, appender, metrics, faults: not on this path
    made = Commits(cast(Any, App(consumer)), lambda name: f"t.{name}", frozenset({TOPIC}), *(unused,) * 5, 10)
    # The detector's fold has waited on an empty feed longer than a lost tail needs (or holds a record),
    # its next record `next_record`.
    made._feeds[TOPIC] = cast(Any, Feed(time.monotonic() - LOST_AFTER_S - 1 if idle else None))
    made._next[(TOPIC, 0)] = next_record
    return made


async def test_one_check_past_the_next_record_is_not_yet_a_loss() -> None:
    # A worker resumed after a pause: idle for seconds by the clock, with a fetch just in.
    consumer = Consumer(at=1016)
    commits = commits_over(consumer, next_record=0)
    await commits._refetch_lost_tails()
    assert consumer.sought == []


async def test_records_handed_over_before_the_next_check_were_not_lost() -> None:
    consumer = Consumer(at=1016)
    commits = commits_over(consumer, next_record=0)
    await commits._refetch_lost_tails()
    commits._next[(TOPIC, 0)] = 1016
    consumer.at = 2040
    await commits._refetch_lost_tails()
    assert consumer.sought == []


async def test_two_checks_in_a_row_past_the_next_record_fetch_it_again() -> None:
    consumer = Consumer(at=1016)
    commits = commits_over(consumer, next_record=3)
    await commits._refetch_lost_tails()
    await commits._refetch_lost_tails()
    assert consumer.sought == [3]


async def test_a_fold_that_holds_a_record_is_not_idle_however_long_it_waits_for_room() -> None:
    # Waiting for its earlier records to be acknowledged, its feed's records fetched but not yet folded.
    consumer = Consumer(at=1016)
    commits = commits_over(consumer, next_record=3, idle=False)
    await commits._refetch_lost_tails()
    await commits._refetch_lost_tails()
    assert consumer.sought == []
