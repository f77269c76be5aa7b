"""The read agent: answers the edge's questions from the partition's tables and the feature view.

Questions share the worker's one event loop with the folds but not their bound on unacknowledged events
(`Settings.query_unacknowledged_max`), so a flood of questions never holds a fold back for room, nor a
slow broker the answers; and answering takes at most `Settings.query_loop_share` of the loop
(processors/loop_share.py). A listing reads at most `Settings.query_scan_max_rows` index rows a partition.
"""

from __future__ import annotations

import time

from domain import queries
from domain.alerts import Alert
from domain.calls import Stored
from processors.commits import Room
from processors.dead_letters import POISON
from processors.feed import Feed
from processors.loop_share import LoopShare
from processors.parts import Parts


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

    @w.fold("queries")
    async def answer_queries(feed: Feed) -> None:
        async for record, pending in w.commits.folds(feed, "queries", room):
            if w.progress.folded("queries", record):
                continue
            if expired(record.message.timestamp, w.settings.answer_deadline_s):
                w.metrics.questions_expired.inc()
                continue
            began = time.perf_counter()
            try:
                question = queries.decode_question(record.value)
                status, body = queries.answer(question, record.message.partition, reads, w.rules)
            except POISON as error:
                await w.dead_letters.put("queries", record, error, pending)
                continue
            await w.replies.reply(record, status, body)
            # Nothing above waits while the feed holds questions (a reply's drain returns at once): without
            # this a backlog of questions was answered back to back while every fold waited for the loop.
            await share.spent(time.perf_counter() - began)
