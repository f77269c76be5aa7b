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
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from domain import queries
from domain.alerts import Alert
from domain.calls import Stored
from processors.folds.commits import Room
from processors.folds.parts import Parts
from processors.folds.shell import Pending, Record, each_record


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

    async def answer(record: Record, pending: Pending, replay: bool) -> None:
        if replay:
            return
        if expired(record.message.timestamp, w.settings.answer_deadline_s):
            w.metrics.questions_expired.inc()
            return
        began = time.perf_counter()
        question = queries.decode_question(record.value)
        status, body = queries.answer(question, record.message.partition, reads, w.rules)
        await w.replies.reply(record, status, body)
        # Nothing above waits while the feed holds questions (a reply's drain returns at once): without
        # this a backlog of questions was answered back to back while every fold waited for the loop.
        await share.spent(time.perf_counter() - began)

    each_record(w, "queries", answer, room)


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
