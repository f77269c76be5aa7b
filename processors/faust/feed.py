"""A folded topic's records, handed by the consumer straight to its fold instead of through Faust's streams
(processors/faust/inline_consumer.py, `_drain_messages`).

Faust takes each record through the conductor's lock, a channel's decode and queue, and a stream's
generator (sensors, acks by reference count, the current event) before an agent sees it: about a sixth
of the worker's CPU while it folds a backlog (docs/decisions/0022-feeds-not-streams.md). A feed
keeps only what the folds rely on from that path:
- the consumer tracks and acknowledges each record, so Faust's commits work as before;
- the record is the task's current event, whose partition the tables read (processors/state/write_behind.py);
- a record fetched before a rebalance is not folded after it (the folds fetch it again,
  `Commits._skipped_before`), and a rebalance empties the buffer, as it empties a stream's;
- a partition stops being fetched while the buffer is above its high-water mark.

Upstream: robinhood/faust#563 ("Message consumption is slow") measures the same per-record cost of the
conductor and the streams against a plain aiokafka consumer.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator
from typing import Any, cast

from faust.streams import _current_event
from faust.transport.conductor import Conductor
from faust.transport.drivers import aiokafka as driver
from faust.types import TP

# The marks of mode's queues, which Faust's streams use: fetching stops at 4/5 full, resumes at 2/5.
PRESSURE_HIGH = 0.8
PRESSURE_DROP = 0.4


class Fed:
    """One record as a fold reads it: the fields of Faust's event that the folds use."""

    __slots__ = ("__weakref__", "headers", "key", "message", "value")

    def __init__(self, message: Any) -> None:
        self.message = message
        self.key = message.key
        self.value = message.value
        self.headers = message.headers


class Feed:
    """The buffer between the consumer and one fold; its fold is the only reader."""

    def __init__(self, app: Any, maxsize: int) -> None:
        self.app = app
        self._buffer: deque[Any] = deque()
        self._high = max(1, int(maxsize * PRESSURE_HIGH))
        self._low = int(maxsize * PRESSURE_DROP)
        # Partitions not fetched while the buffer is above its high-water mark.
        self._held: set[Any] = set()
        self._ready = _Signal()
        # Since when the fold has waited with the buffer empty; None while it holds or folds a record (a
        # fold waiting for room to fold the record it holds is not idle: `Commits._refetch_lost_tails`).
        self.idle_since: float | None = None
        # Faust empties the buffers it manages when a rebalance ends.
        app.flow_control.manage_queue(self)

    async def deliver(self, messages: list[Any]) -> None:
        """The consumer's hand-over of records of one partition, in offset order (never waits, so the
        detector's records are not held up)."""
        app = self.app
        if not app.flow_control.is_active():
            await app.flow_control.acquire()
        consumer = app.consumer
        track = consumer.track_message
        for message in messages:
            message.tracked = True
            track(message)
        buffer = self._buffer
        buffer.extend(messages)
        self._ready.set()
        last = messages[-1]
        if len(buffer) >= self._high and last.tp not in self._held:
            # Faust's own partition type: its consumer's bookkeeping takes no other.
            tp = TP(last.topic, last.partition)
            self._held.add(tp)
            consumer.on_buffer_full(tp)

    def clear(self) -> None:
        """Faust's flow control empties its queues when a rebalance suspends the flow, and again when the
        flow resumes. The second would drop what the consumer handed over since: after a recovery, the
        records the seek to the committed offsets let through (mode's `FlowControlEvent.resume`), so the
        next record looked like a gap and every such partition was fetched again. A record kept here is
        checked all the same: one of an older generation is skipped (`events`), and one behind or past
        the fold's position is skipped or fetched again (`Commits._skipped_before`)."""
        if self.app.flow_control.is_active():
            return
        self._buffer.clear()
        self._release()

    async def events(self) -> AsyncIterator[Fed]:
        """The records in order of arrival, each the current event while its fold runs."""
        app = self.app
        buffer = self._buffer
        inbound = app.monitor.stream_inbound_time
        while True:
            if not buffer:
                self.idle_since = time.monotonic()
                while not buffer:
                    await self._ready.wait()
                self.idle_since = None
            message = buffer.popleft()
            if self._held and len(buffer) <= self._low:
                self._release()
            if message.generation_id != app.consumer_generation_id or not app.flow_control.is_active():
                continue
            # Faust's check for stalled partitions reads when each last reached a fold.
            inbound[message.tp] = time.monotonic()
            event = Fed(message)
            make_current(event)
            yield event

    async def ack(self, event: Fed) -> None:
        self.app.consumer.ack(event.message)

    def _release(self) -> None:
        consumer = self.app.consumer
        # Not a partition a rebalance took away since: Faust would take it back into its fetches.
        assigned = consumer.assignment()
        for tp in self._held & assigned:
            consumer.on_buffer_drop(tp)
        self._held.clear()


class _Signal:
    """A wake-up for the one reader: cheaper than an `asyncio.Event` set for every record."""

    def __init__(self) -> None:
        self._waiter: asyncio.Future[None] | None = None

    def set(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None


class FeedConductor(Conductor):
    """Faust's conductor, with a feed for each topic folded from one: the consumer hands their records to
    their feeds, a fetched partition's batch at a time (processors/faust/inline_consumer.py, `_drain_messages`),
    and never to the conductor's channels."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.feeds: dict[str, Feed] = {}
        super().__init__(*args, **kwargs)


def feed_folds() -> None:
    """Every Faust app made after this keeps the feeds of its folded topics on its conductor."""
    driver.Transport.Conductor = FeedConductor


def make_current(event: Fed) -> None:
    """`event` the current event of the running task: the tables read the partition of the current event,
    and a question answered after its fold has returned (processors/folds/queries.py) reads its own."""
    _current_event.set(weakref.ref(cast(Any, event)))
