"""POST /v1/events and POST /v1/events/<ingest_token>: validate, append, answer from the worker."""

from __future__ import annotations

import time
import uuid

from aiohttp import web

from callscreen.times import now_ms
from ingest import guards
from ingest.errors import json_response
from ingest.service import edge_of
from ingest.validation import validate_event


async def post_event(request: web.Request) -> web.Response:
    edge = edge_of(request)
    principal = guards.event_poster(request)
    body = await guards.json_object(request)
    received = now_ms()
    record = validate_event(body, received, edge.settings.max_future_at_s * 1000)
    account = principal.account
    record.update(id=uuid.uuid4().hex, account_id=account.id, plan=account.plan, received_at=received)
    if record["type"] == "call.started":
        record["trusted"] = record["caller"] in account.trusted
    key = f"{account.id}:{record['call_id']}"
    started = time.perf_counter()
    pending = await edge.send_request(edge.settings.topic("events"), key, record)
    edge.metrics.events.labels(type=record["type"]).inc()
    reply = await edge.answer(pending)
    edge.metrics.answers.labels(type=record["type"]).observe(time.perf_counter() - started)
    return json_response(reply["body"], status=reply["status"])


def add_routes(app: web.Application) -> None:
    app.router.add_post("/v1/events", post_event)
    app.router.add_post("/v1/events/{token}", post_event)
