"""POST /v1/calls/<call_id>/label: the owner's label for a call (decisions section 17), answered with the
call record by the worker that holds the call."""

from __future__ import annotations

import uuid
from typing import Any

from aiohttp import web

from domain.accounts import Account
from domain.validation import parse_label
from infra.clock import now_ms
from ingest import guards
from ingest.errors import json_response
from ingest.service import Edge, edge_of


async def label_call(edge: Edge, account: Account, call_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """Append the label as an event of its call, keyed as the call's events are, and wait for the answer:
    the call record as the label left it, or 404 `not_found` (the dashboard's buttons post here too)."""
    stamp = account.stamp(uuid.uuid4().hex, now_ms())
    event = parse_label(body, stamp, call_id)
    return await edge.ask_event(account.id, event)


async def post_label(request: web.Request) -> web.Response:
    edge = edge_of(request)
    account = guards.writer(request).account
    body = await guards.json_object(request)
    reply = await label_call(edge, account, request.match_info["call_id"], body)
    return json_response(reply["body"], status=reply["status"])


def add_routes(app: web.Application) -> None:
    app.router.add_post("/v1/calls/{call_id}/label", post_label)
