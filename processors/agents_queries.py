"""The read agent: answers the edge's questions from the partition's tables and the feature view."""

from __future__ import annotations

from domain import queries
from domain.alerts import Alert
from domain.calls import Stored
from processors.dead_letters import POISON
from processors.feed import Feed
from processors.parts import Parts


def register(w: Parts) -> None:
    reads = queries.Reads(
        w.view,
        call_of=w.tables.reader("calls", Stored),
        call_index_scan=w.tables.scanner("call_index"),
        alert_of=w.tables.reader("alert_store", Alert),
        alert_index_scan=w.tables.scanner("alert_store"),
    )

    @w.fold("queries")
    async def answer_queries(feed: Feed) -> None:
        async for record, pending in w.commits.folds(feed, "queries"):
            if w.progress.folded("queries", record):
                continue
            try:
                question = queries.decode_question(record.value)
                status, body = queries.answer(question, record.message.partition, reads, w.rules)
            except POISON as error:
                await w.dead_letters.put("queries", record, error, pending)
                continue
            await w.replies.reply(record, status, body)
