"""The read agent: answers the edge's questions from the partition's tables and the feature view.

Questions share the worker's one event loop with the folds but not their bound on unacknowledged events
(`Settings.query_unacknowledged_max`), so a flood of questions never holds a fold back for room, nor a
slow broker the answers; and answering takes at most `Settings.query_loop_share` of the loop
(`LoopShare`, below). A listing reads at most `Settings.query_scan_max_rows` index rows a partition.

`LoopShare` bounds how much of a worker's one event loop the answers to questions may take.

Questions run on the loop that folds events. Yielding after each answer lets a waiting fold in, but when
questions never stop coming they still take the loop turn about with the folds: one account looping a
listing over a large index left the folds a fraction of the loop, and every account's starts waited out
the edge's deadline (docs/hostile-runs.md, "Tenant isolation"). Here the time spent answering is charged
to a bucket that refills at `share` of the wall clock; an answer that overdraws it waits until it is
paid back, so the folds keep the rest of the loop, however many questions are queued. The credit an idle
spell banks is small (`burst_s`): questions run back to back for no longer than a fold may wait.

`Waiting` decides whose question is answered next. Answered in arrival order, one account looping listings
filled the queue and every other account's reads waited behind it past the edge's deadline; taken by the
answering time each account has had, the others' wait is bounded by how many accounts are asking, not by
how much one of them asks, and cheap reads are not paced by a flood's costly ones.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from faust.types import TP

from domain import queries
from domain.alerts import Alert
from domain.calls import Stored
from processors.faust.feed import make_current
from processors.folds.commits import Room
from processors.folds.parts import Parts
from processors.folds.shell import Pending, Record, each_record

log = logging.getLogger(__name__)
T = TypeVar("T")
# What a worker answers when an account's turn at its questions is full: the edge's `unavailable`.
BUSY = (503, {"error": "unavailable"})


def expired(asked_at_s: float | None, deadline_s: float) -> bool:
    """Whether the edge that asked (its record's create time) has answered 503 already: an answer now would
    reach no one, and a backlog of such questions kept the worker busy long after a flood had stopped."""
    return asked_at_s is not None and time.time() - asked_at_s > deadline_s


def register(w: Parts) -> None:
    reads = queries.Reads(
        w.view,
        call_of=w.tables.reader("calls", Stored),
        call_index_scan=w.tables.scanner("call_index"),
        alert_of=w.tables.reader("alert_store", Alert),
        alert_index_scan=w.tables.scanner("alert_store"),
        scan_max_rows=w.settings.query_scan_max_rows,
    )
    room = Room(w.settings.query_unacknowledged_max)
    share = LoopShare(w.settings.query_loop_share)
    waiting: Waiting[tuple[Record, queries.AnyQuestion]] = Waiting(
        w.settings.query_waiting_per_account, w.settings.query_waiting_max
    )

    def too_late(record: Record) -> bool:
        if expired(record.message.timestamp, w.settings.answer_deadline_s):
            w.metrics.questions_expired.inc()
            return True
        return False

    async def take(record: Record, pending: Pending, replay: bool) -> None:
        if replay or too_late(record):
            return
        question = queries.decode_question(record.value)
        if not waiting.put(question.account_id, (record, question)):
            w.metrics.questions_refused.inc()
            await w.replies.reply(record, *BUSY)

    def held(record: Record) -> bool:
        """Whether the partition asked about is still this worker's: a rebalance while the question waited
        handed its rows to another worker (the edge answers 503 at its deadline)."""
        consumer = w.app.consumer
        return consumer is not None and TP(record.message.topic, record.message.partition) in consumer.assignment()

    async def answer(record: Record, question: queries.AnyQuestion) -> float:
        """Answer the question unless no one waits for it any more; returns the seconds answering took."""
        if too_late(record) or not held(record):
            return 0.0
        make_current(record)
        began = time.perf_counter()
        status, body = queries.answer(question, record.message.partition, reads, w.rules)
        spent = time.perf_counter() - began
        await w.replies.reply(record, status, body)
        # Charged for the answer's own work only: a reply waiting on a busy edge's socket is not the loop's
        # time, and charging it made the next account in turn wait out a long rest. Without the charge a
        # backlog of questions was answered back to back while every fold waited for the loop.
        await share.spent(spent)
        return spent

    @w.app.task
    async def answering() -> None:
        while True:
            account, (record, question) = await waiting.get()
            try:
                waiting.charge(account, await answer(record, question))
            except Exception as error:
                log.error("answering a question failed; stopping the worker")
                await w.app.crash(error)
                raise

    each_record(w, "queries", take, room)


class Waiting(Generic[T]):
    """The questions waiting at a worker, at most `per_account` of an account's and `most` in all. The next
    one answered is the oldest of the account that has had the least answering time while it was waiting
    (start-time fair queuing; `charge` says what an answer took), the least recently served on a tie: equal
    questions take turns one each, and an account of cheap reads is not held back a turn for every costly
    one of a flood's."""

    def __init__(self, per_account: int, most: int) -> None:
        self.per_account = per_account
        self.most = most
        self.size = 0
        self._items: dict[str, deque[T]] = {}
        # Answering time charged to each account, on a clock shared by all: an account that starts asking
        # starts at the time of the last account served, so sitting idle banks nothing.
        self._tags: dict[str, float] = {}
        self._now = 0.0
        # When each account was last served (or started asking): ties go to the one served longest ago.
        self._served: dict[str, int] = {}
        self._turns = 0
        self._ready = asyncio.Event()

    def put(self, account: str, item: T) -> bool:
        """Queue `item` for `account`; False, and nothing queued, past either bound."""
        items = self._items.get(account)
        if self.size >= self.most or (items is not None and len(items) >= self.per_account):
            return False
        if items is None:
            items = self._items[account] = deque()
            self._tags[account] = max(self._tags.get(account, self._now), self._now)
            self._served.setdefault(account, self._next_turn())
        items.append(item)
        self.size += 1
        self._ready.set()
        return True

    async def get(self) -> tuple[str, T]:
        """The next account's oldest item, once there is one; `charge` the account what answering it took."""
        while not self._items:
            self._ready.clear()
            await self._ready.wait()
        account = min(self._items, key=lambda a: (self._tags[a], self._served[a]))
        self._now = self._tags[account]
        self._served[account] = self._next_turn()
        items = self._items[account]
        item = items.popleft()
        self.size -= 1
        if not items:
            del self._items[account]
        return account, item

    def charge(self, account: str, seconds: float) -> None:
        self._tags[account] += seconds
        if len(self._tags) > 2 * len(self._items) + 64:
            self._forget_idle()

    def _next_turn(self) -> int:
        self._turns += 1
        return self._turns

    def _forget_idle(self) -> None:
        """Accounts with nothing waiting and no time owed: they would start again at `_now` anyway."""
        for account in [a for a, tag in self._tags.items() if a not in self._items and tag <= self._now]:
            del self._tags[account]
            self._served.pop(account, None)


class LoopShare:
    def __init__(
        self,
        share: float,
        burst_s: float = 0.005,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.share = share
        self.burst_s = burst_s
        self.clock = clock
        self.sleep = sleep
        self._credit = burst_s
        self._refilled = clock()

    def _refill(self) -> None:
        now = self.clock()
        self._credit = min(self.burst_s, self._credit + (now - self._refilled) * self.share)
        self._refilled = now

    async def spent(self, seconds: float) -> None:
        """Charge `seconds` of answering; return once the loop is the folds' again (at least one turn)."""
        self._refill()
        self._credit -= seconds
        await self.sleep(max(0.0, -self._credit / self.share))
