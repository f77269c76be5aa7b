"""POST /v1/events and POST /v1/events/<ingest_token>: validate, append, answer from the worker."""

from __future__ import annotations

import uuid

from aiohttp import web

from domain.validation import TimeBounds, parse_event
from infra.clock import now_ms
from ingest import guards
from ingest.errors import json_response
from ingest.service import edge_of


async def post_event(request: web.Request) -> web.Response:
    edge = edge_of(request)
    principal = await guards.event_poster(request)
    body = await guards.json_object(request)
    account = principal.account
    stamp = account.stamp(uuid.uuid4().hex, now_ms(), principal.credential)
    event = parse_event(body, stamp, TimeBounds.of(edge.settings.rules.limits))
    edge.charge_bytes(account.id, len(await request.read()))
    reply = await edge.ask_event(account.id, event)
    return json_response(reply["body"], status=reply["status"])


def add_routes(app: web.Application) -> None:
    app.router.add_post("/v1/events", post_event)
    app.router.add_post("/v1/events/{token}", post_event)
