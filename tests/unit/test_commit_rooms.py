"""Questions hold a room of their own for what they answered and is not yet acknowledged
(`Settings.query_unacknowledged_max`): a flood of questions waiting for room holds no fold back, and a
flush gives each event's room back to the fold it came from (`processors.folds.commits.Room`).

The consumer, feeds and stores here are stand-ins for what `Commits` calls on this path; the folds'
records reach it from a real broker in the pipeline tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, cast

from processors.folds.commits import Commits, Room

ROOM = 2


@dataclass(frozen=True)
class Message:
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class Record:
    message: Message


@dataclass
class ListFeed:
    """A feed of `count` records of one partition; it records what was acknowledged."""

    topic: str
    count: int
    acked: list[int] = field(default_factory=list)
    idle_since: float | None = None

    async def events(self) -> AsyncIterator[Record]:
        for offset in range(self.count):
            yield Record(Message(self.topic, 0, offset))

    async def ack(self, event: Record) -> None:
        self.acked.append(event.message.offset)


class Histogram:
    def labels(self, name: str) -> Histogram:
        return self

    def observe(self, seconds: float) -> None:
        pass


@dataclass
class Metrics:
    fold_seconds: Histogram = field(default_factory=Histogram)


@dataclass
class Consumer:
    # No committed offsets: each partition's first record is where folding starts.
    _committed_offset: dict[Any, int] = field(default_factory=dict)


@dataclass
class App:
    consumer: Consumer = field(default_factory=Consumer)


class Stores:
    """The view store, tables, appender and faults of a flush with nothing written."""

    send_changelog = None

    def write_pending(self) -> None:
        pass

    async def flush(self, send: Any) -> list[asyncio.Future[Any]]:
        return []

    def at(self, point: str) -> None:
        pass


def commits() -> Commits:
    stores: Any = Stores()
    metrics: Any = Metrics()
    return Commits(
        cast(Any, App()), lambda name: f"t.{name}", frozenset(), stores, stores, stores, metrics, stores, ROOM
    )


async def test_questions_out_of_room_hold_no_fold_back() -> None:
    made = commits()
    questions = Room(ROOM)
    asked, events = ListFeed("t.queries", 5), ListFeed("t.events", ROOM)
    answered: list[int] = []

    async def answer() -> None:
        async for record, _ in made.folds(cast(Any, asked), "queries", questions):
            answered.append(record.message.offset)

    answering = asyncio.create_task(answer())
    for _ in range(100):
        if questions.held == ROOM:
            break
        await asyncio.sleep(0)
    assert (answered, questions.held) == ([0, 1], ROOM)

    # With one room for both, this fold would wait for the questions' acknowledgements.
    folded = [record.message.offset async for record, _ in made.folds(cast(Any, events), "events")]
    assert (folded, made.room.held, answered) == ([0, 1], ROOM, [0, 1])

    await made.flush()
    assert made._last_flush is not None and await made._last_flush
    assert (asked.acked, events.acked) == ([0, 1], [0, 1])
    # Each room got its own back: the questions go on, two more, until the next flush.
    for _ in range(100):
        if answered == [0, 1, 2, 3]:
            break
        await asyncio.sleep(0)
    assert (answered, questions.held, made.room.held) == ([0, 1, 2, 3], ROOM, 0)
    answering.cancel()
