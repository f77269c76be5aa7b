"""GET /v1/evaluation (decisions section 17): the account's labelled calls in a window against their
live answers, tallied by every partition's owner and added up here."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from aiohttp import web

from domain import evaluation
from domain.index import Position
from domain.queries import EvaluationPart
from ingest import guards
from ingest.errors import invalid_field, json_response
from ingest.routes_reads import time_param
from ingest.service import Edge, edge_of


async def evaluate(edge: Edge, account_id: str, since: int | None, until: int | None) -> dict[str, Any]:
    """The evaluation body, charged to the account's read budget once. Each partition is read in bounded
    steps (`Settings.query_scan_max_rows` rows each), so a long window never holds a worker's loop."""
    edge.limit(edge.account_read_limiter, account_id)

    async def partition_tally(partition: int) -> evaluation.Tally:
        total = evaluation.empty()
        before: Position | None = None
        while True:
            question = EvaluationPart(account_id=account_id, since=since, until=until, before=before)
            reply = await edge.question(str(partition), question, partition=partition)
            body = reply["body"]
            evaluation.add(total, body["tally"])
            if body["stop"] is None:
                return total
            before = msgspec.convert(body["stop"], Position)

    tally = evaluation.empty()
    for part in await asyncio.gather(*(partition_tally(p) for p in range(edge.settings.partitions))):
        evaluation.add(tally, part)
    return evaluation.report(tally)


async def get_evaluation(request: web.Request) -> web.Response:
    account = guards.reader(request).account
    since, until = time_param(request, "since"), time_param(request, "until")
    if since is not None and until is not None and until <= since:
        raise invalid_field("until")
    return json_response(await evaluate(edge_of(request), account.id, since, until))


def add_routes(app: web.Application) -> None:
    app.router.add_get("/v1/evaluation", get_evaluation)
