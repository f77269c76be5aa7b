"""Offsets are committed after what they cover is durable, never after the answer alone.

A fold writes its table rows and the feature view in memory and queues its appends; none waits. The rows
reach RocksDB and their changelogs, and the view its RocksDB, in a coalesced flush every
`changelog_flush_ms`, and an event's offset is acknowledged (so Faust may commit it) only once that
flush and every record the fold appended are acknowledged by the broker. A crash before that refolds the
event; every fold is idempotent.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import faust
from faust.types import TP

from processors.faults import Faults
from processors.faust.feed import Fed, Feed
from processors.faust.patches import committed_offset, read_offset
from processors.metrics import WorkerMetrics
from processors.output.appender import Appender
from processors.state.rocks import RocksStore, persist_all
from processors.state.tables import Tables

log = logging.getLogger(__name__)
# A folded event: its feed, the event, the acks of what its fold appended, its partition's assignment
# (`Commits.revoked`) when it was handed over, and the room it takes until it is acknowledged.
Held = tuple[Feed, Fed, list["asyncio.Future[Any]"], int, "Room"]
# A fold waiting this long with its partition's position past its next record has lost those records.
LOST_AFTER_S = 2.0


class Room:
    """Folded events not yet acknowledged, `most` at most: past it the folds that share the room wait."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.held = 0
        self._free = asyncio.Event()
        self._free.set()

    async def wait(self) -> None:
        if self.held >= self.most:
            await self._free.wait()

    def take(self) -> None:
        self.held += 1
        if self.held >= self.most:
            self._free.clear()

    def give_back(self, count: int) -> None:
        self.held -= count
        if self.held < self.most:
            self._free.set()


class Commits:
    def __init__(
        self,
        app: faust.App,
        topic_name: Callable[[str], str],
        source_topics: frozenset[str],
        tables: Tables,
        view_store: RocksStore,
        appender: Appender,
        metrics: WorkerMetrics,
        faults: Faults,
        unacknowledged_max: int,
    ) -> None:
        self.app = app
        self.topic_name = topic_name
        self.source_topics = source_topics
        self.faults = faults
        self.tables = tables
        self.view_store = view_store
        self.appender = appender
        self.metrics = metrics
        # Folded events whose table writes are not yet on a changelog: acknowledged by the next flush.
        self._unflushed: list[Held] = []
        self._flush_lock = asyncio.Lock()
        self._last_flush: asyncio.Task[bool] | None = None
        self._settling: set[asyncio.Task[bool]] = set()
        # The next offset each partition must deliver, and where a gap was found and fetched again.
        self._next: dict[tuple[str, int], int] = {}
        self._refetching: dict[tuple[str, int], int] = {}
        # Each folded topic's feed, which says since when its fold has been idle.
        self._feeds: dict[str, Feed] = {}
        # Partitions whose position the last check found past the fold's next record, with that record.
        self._past_at_last_check: dict[tuple[str, int], int] = {}
        # How many times each partition was revoked: an event handed over before a revocation is not acknowledged.
        self._revocations: dict[tuple[str, int], int] = {}
        # Folds under way in every agent, and an event set whenever none is.
        self._folding = 0
        self._no_fold = asyncio.Event()
        self._no_fold.set()
        # Set by a clean stop: no event is folded after it (those left are refolded by the next start).
        self._closing = False
        # Folded events not yet acknowledged (`Settings.worker_unacknowledged_max` at most), the folds'
        # unless a fold brings a room of its own.
        self.room = Room(unacknowledged_max)

    async def folds(
        self, feed: Feed, name: str, room: Room | None = None
    ) -> AsyncIterator[tuple[Fed, list[asyncio.Future[Any]]]]:
        """The feed's events, each with a list for the acks of what folding it appended; each takes `room`
        (the folds' shared one by default) until it is acknowledged."""
        room = self.room if room is None else room
        histogram = self.metrics.fold_seconds.labels(name)
        self._feeds[self.topic_name(name)] = feed
        async for event in feed.events():
            await room.wait()
            if self._closing:
                continue
            if not await self._skipped_before(event):
                revocations = self._revocations.get((event.message.topic, event.message.partition), 0)
                started = time.perf_counter()
                pending: list[asyncio.Future[Any]] = []
                self._folding += 1
                self._no_fold.clear()
                try:
                    yield event, pending
                finally:
                    self._folding -= 1
                    if not self._folding:
                        self._no_fold.set()
                histogram.observe(time.perf_counter() - started)
                self._unflushed.append((feed, event, pending, revocations, room))
                room.take()

    async def _skipped_before(self, event: Any) -> bool:
        """True for an event that came after a gap: the records the feed skipped are fetched again.

        A rebalance drops the records a feed holds and those fetched before it (processors/faust/feed.py), and
        Faust may then commit past them once a later record is acknowledged. A source topic has no gaps
        of its own, so a jump in offsets is such a drop: seek back and fold from the first missing record.
        """
        message = event.message
        key = (message.topic, message.partition)
        expected = self._expected(key)
        if expected is not None and message.offset < expected:
            return True  # handed over again after a seek: folded already
        if expected is not None and message.offset > expected:
            if self._refetching.get(key) != expected:
                log.warning(
                    "the stream skipped records; fetching them again",
                    extra={"topic": message.topic, "partition": message.partition, "from": expected},
                )
                self._refetching[key] = expected
            await self._seek_if_overtaken(key)
            return True
        self._refetching.pop(key, None)
        self._next[key] = message.offset + 1
        return False

    def _expected(self, key: tuple[str, int]) -> int | None:
        """The offset of the next record to fold from a partition, None when it is not known."""
        expected = self._next.get(key)
        return self._assignment_start(key) if expected is None else expected

    def _assignment_start(self, key: tuple[str, int]) -> int | None:
        """Where folding a newly assigned partition starts: its committed offset; with none, offset 0 of a
        source topic (it keeps every record), and unknown for a working topic (its start moves).

        Faust can drop the first records after an assignment as it drops a batch cut short by a
        rebalance (`_refetch_lost_tails`), and a partition's first event then came after records no
        one folded: a turn answered 404 because its call's start was never folded. No broker request
        here: on the consumer's connection it would wait behind the long poll of a fetch."""
        committed = committed_offset(self.app.consumer, TP(*key))
        if committed is not None:
            return committed
        return 0 if key[0] in self.source_topics else None

    async def _seek_if_overtaken(self, key: tuple[str, int]) -> None:
        """Seek back to the first missing record unless the consumer will already hand it over next.

        Records fetched before a seek can still be handed over after it and move Faust's read offset
        past the missing ones again, and Faust then drops them when they arrive: seek again until the
        missing record comes."""
        tp, expected = TP(*key), self._refetching[key]
        read = read_offset(self.app.consumer, tp)
        # Faust keeps a seek to offset 0 as no read offset at all.
        if read != (expected or None):
            await self.app.consumer.seek(tp, expected)

    async def recheck(self) -> None:
        """Between records: a refetch that in-flight records overtook is sought again (a feed with no
        record left to hand over would otherwise wait for the missing ones forever), and so are records
        the consumer fetched that never reached an idle fold."""
        for key in list(self._refetching):
            await self._seek_if_overtaken(key)
        await self._refetch_lost_tails()

    async def _refetch_lost_tails(self) -> None:
        """Seek back where the consumer's position has passed records its feed never handed over.

        A rebalance drops a fetched batch whose hand-over it cut short (a new generation), after
        the consumer's position moved past it. A later record shows the gap (`_skipped_before`); when
        none comes, such as after the last events of a burst, the partition would wait forever. A fold
        idle for `LOST_AFTER_S` has nothing in its buffer, so records below the position are lost.

        Only when two checks in a row find it so: a worker paused for seconds (a stopped process, a
        stalled host) resumes with its fold idle that long by the clock and a fetch just in that the feed
        has not handed over yet. One check took those records for lost and fetched them again.
        """
        if self.app.rebalancing or self.app.consumer is None:
            return
        now = time.monotonic()
        past, self._past_at_last_check = self._past_at_last_check, {}
        for tp in self.app.consumer.assignment():
            key = (tp.topic, tp.partition)
            # Only the topics folded here have a feed (a changelog's partitions are assigned too).
            feed = self._feeds.get(tp.topic)
            since = None if feed is None else feed.idle_since
            if since is None or now - since < LOST_AFTER_S or key in self._refetching:
                continue
            expected = self._expected(key)
            if expected is None:
                continue
            position = await self.app.consumer.position(tp)
            if position is not None and position > expected:
                if past.get(key) != expected:
                    self._past_at_last_check[key] = expected
                    continue
                log.warning(
                    "records were fetched but never handed over; fetching them again",
                    extra={"topic": key[0], "partition": key[1], "from": expected, "position": position},
                )
                self._refetching[key] = expected
                await self.app.consumer.seek(tp, expected)

    def revoked(self, partitions: set[Any]) -> None:
        """Another worker may fold these partitions before they come back: forget where they were."""
        for tp in partitions:
            key = (tp.topic, tp.partition)
            self._next.pop(key, None)
            self._refetching.pop(key, None)
            self._revocations[key] = self._revocations.get(key, 0) + 1

    async def hand_over(self, timeout_s: float) -> bool:
        """Before a rebalance hands partitions on: until no fold is under way and every table write folded
        so far is on its changelog. True when it got there.

        The next owner recovers a partition from its changelog up to the end it finds. A fold that went
        on past the revocation (Faust does not wait for the event an agent holds) or a changelog record
        still in flight would land after that end, behind the new owner's writes of the same key, and a
        later recovery would bring the older value back: a call ended, then open again."""
        try:
            await asyncio.wait_for(self._no_fold.wait(), timeout_s)
            await self.flush()
            if self._last_flush is None:
                return True
            return await asyncio.wait_for(asyncio.shield(self._last_flush), timeout_s)
        except TimeoutError:
            log.warning("handing partitions over before what was folded is durable", extra={"folding": self._folding})
            return False

    async def close(self, timeout_s: float) -> None:
        """At a clean stop: fold nothing more, hand everything over (`hand_over`), then put the view and the
        tables on disk, which RocksDB writes without its log (processors/state/rocks.py). A hand-over that timed out
        leaves its unacknowledged rows out of both: the next start refolds their events."""
        self._closing = True
        await self.hand_over(timeout_s)
        self.view_store.persist()
        self.tables.persist()

    async def checkpoint(self) -> None:
        """RocksDB's memtables on disk, on a thread of their own so the folds go on: after a kill, a start
        recovers only the changelog records (and the mirror only the facts) since the last checkpoint."""
        databases = [*self.tables.databases(), self.view_store.db]
        await asyncio.to_thread(persist_all, databases)

    async def flush(self) -> int:
        """Send every table's changed keys to its changelog; once they, every earlier flush's and what the
        folds appended are durable, acknowledge the events folded before this flush began. Flushes never
        interleave. Returns how many changelog records it sent."""
        async with self._flush_lock:
            held, self._unflushed = self._unflushed, []
            self.view_store.write_pending()
            written = await self.tables.flush(self.appender.send_changelog)
            # An event's writes may have gone out with an earlier flush, still in flight.
            task = asyncio.create_task(self._ack_when_durable(held, written, self._last_flush))
            self._last_flush = task
            self._settling.add(task)
            task.add_done_callback(self._settling.discard)
            return len(written)

    async def _ack_when_durable(
        self, held: list[Held], written: list[asyncio.Future[Any]], previous: asyncio.Task[bool] | None
    ) -> bool:
        """True once the flush's records are durable and its events acknowledged."""
        try:
            return await self._acknowledge(held, written, previous)
        finally:
            for *_, room in held:
                room.give_back(1)

    async def _acknowledge(
        self, held: list[Held], written: list[asyncio.Future[Any]], previous: asyncio.Task[bool] | None
    ) -> bool:
        if previous is not None and not await previous:
            return False
        try:
            for ack in written + [ack for _, _, pending, _, _ in held for ack in pending]:
                await ack
        except Exception as exc:
            # The fold is ahead of the log: stop, so a restart refolds from the last committed offset.
            log.exception("a record the fold appended was not acknowledged; stopping the worker")
            await self.app.crash(exc)
            return False
        self.faults.at("before_ack")
        for feed, event, _, revocations, _ in held:
            # After a revocation the consumer's bookkeeping of the partition starts again from its committed
            # offset, and Faust commits past one unacknowledged offset at its head: an acknowledgement from
            # before could commit an event the partition's next fold never saw. Its next owner folds it again.
            message = event.message
            if self._revocations.get((message.topic, message.partition), 0) == revocations:
                await feed.ack(event)
        if held:
            self.faults.at("before_commit")
        return True
