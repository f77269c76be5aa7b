"""Read endpoints (schemas/openapi.json): calls, numbers, score, reputation, alerts."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import msgspec
from aiohttp import web

from domain import keys
from domain.alerts import SEVERITY
from domain.events import CallerInfo, NumberInfo
from domain.index import AlertEntry, CallEntry, Entry, Position, decode_cursor, encode_cursor, entry_id, page_of
from domain.phone import Number, parse_number
from domain.queries import (
    AlertGet,
    AlertsList,
    CallGet,
    CallsList,
    NumbersList,
    ReputationQuestion,
    ScoreQuestion,
)
from domain.times import parse_ms
from infra.clock import now_ms
from ingest import guards
from ingest.errors import ApiError, invalid_field, json_response
from ingest.service import edge_of

ACTIONS = ("allow", "review", "reject")
MAX_LIMIT = 200
DEFAULT_LIMIT = 50
MAX_SOURCE = 256


async def get_call(request: web.Request) -> web.Response:
    edge = edge_of(request)
    account = guards.reader(request).account
    call_id = request.match_info["call_id"]
    reply = await edge.query(CallGet(account_id=account.id, call_id=call_id), keys.call(account.id, call_id))
    if reply["status"] == 200 and "alias_of" in reply["body"]:
        target = reply["body"]["alias_of"]
        reply = await edge.query(CallGet(account_id=account.id, call_id=target), keys.call(account.id, target))
    return json_response(reply["body"], status=reply["status"])


def time_param(request: web.Request, name: str) -> int | None:
    raw = request.query.get(name)
    if raw is None:
        return None
    value = parse_ms(raw)
    if value is None:
        raise invalid_field(name)
    return value


def _limit(request: web.Request) -> int:
    raw = request.query.get("limit")
    if raw is None:
        return DEFAULT_LIMIT
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
        raise invalid_field("limit")
    return int(raw)


async def list_calls(request: web.Request) -> web.Response:
    edge = edge_of(request)
    account = guards.reader(request).account
    number = None
    if "number" in request.query:
        parsed = parse_number(request.query["number"])
        if parsed is None:
            raise invalid_field("number")
        number = parsed.e164
    action = request.query.get("action")
    if action is not None and action not in ACTIONS:
        raise invalid_field("action")
    source = request.query.get("source")
    if source is not None and (not source or len(source) > MAX_SOURCE):
        raise invalid_field("source")
    question = CallsList(
        account_id=account.id,
        limit=_limit(request),
        number=number,
        since=time_param(request, "since"),
        until=time_param(request, "until"),
        action=action,
        source=source,
        cursor=_cursor(request),
    )
    replies = await edge.query_all(question)
    return json_response(merge_pages(replies, "calls", list[CallEntry], question.limit))


def merge_pages(replies: list[dict[str, Any]], records_key: str, entries_type: Any, limit: int) -> dict[str, Any]:
    """One page, newest first, from every partition's best `limit + 1` entries; short of `limit` (even empty)
    with a `next_cursor` when a partition stopped at its bound on rows read (`domain.index.page_of`)."""
    entries: list[Entry] = []
    records: dict[str, Any] = {}
    stops: list[Position] = []
    for reply in replies:
        body = reply["body"]
        entries.extend(msgspec.convert(body["entries"], entries_type))
        records.update(body[records_key])
        # A worker from before the bound sends no stop.
        if body.get("stop") is not None:
            stops.append(msgspec.convert(body["stop"], Position))
    page, after = page_of(entries, stops, limit)
    next_cursor = None if after is None else encode_cursor(after)
    return {"data": [records[entry_id(e)] for e in page], "next_cursor": next_cursor}


def _cursor(request: web.Request) -> str | None:
    cursor = request.query.get("cursor")
    if cursor is not None and decode_cursor(cursor) is None:
        raise invalid_field("cursor")
    return cursor


async def list_alerts(request: web.Request) -> web.Response:
    edge = edge_of(request)
    account = guards.reader(request).account
    kind = request.query.get("type")
    if kind is not None and kind not in SEVERITY:
        raise invalid_field("type")
    question = AlertsList(
        account_id=account.id,
        limit=_limit(request),
        since=time_param(request, "since"),
        type=kind,
        cursor=_cursor(request),
    )
    return json_response(merge_pages(await edge.query_all(question), "alerts", list[AlertEntry], question.limit))


async def get_alert(request: web.Request) -> web.Response:
    edge = edge_of(request)
    account = guards.reader(request).account
    reply = await edge.query(AlertGet(account_id=account.id, alert_id=request.match_info["alert_id"]), account.id)
    return json_response(reply["body"], status=reply["status"])


async def list_numbers(request: web.Request) -> web.Response:
    edge = edge_of(request)
    account = guards.reader(request).account
    reply = await edge.query(NumbersList(account_id=account.id, plan=account.plan, now=now_ms()), account.id)
    return json_response(reply["body"], status=reply["status"])


def _number_param(request: web.Request, name: str) -> Number:
    number = parse_number(request.query.get(name))
    if number is None:
        raise ApiError(400, f"invalid_{name}")
    return number


async def get_score(request: web.Request) -> web.Response:
    edge = edge_of(request)
    account = guards.reader(request).account
    to, frm = _number_param(request, "to"), _number_param(request, "from")
    direction = request.query.get("direction", "inbound")
    if direction not in ("inbound", "outbound"):
        raise ApiError(400, "invalid_direction")
    protected, other = (to, frm) if direction == "inbound" else (frm, to)
    question = ScoreQuestion(
        account_id=account.id,
        number=protected.e164,
        caller=other.e164,
        at=now_ms(),
        trusted=other.e164 in account.trusted,
        policy=account.policy,
        direction=direction,
        outbound=account.outbound if direction == "outbound" else None,
        number_info=NumberInfo(country=protected.country, national=protected.national),
        caller_info=CallerInfo(
            country=other.country, national=other.national, valid=other.valid, premium=other.premium
        ),
    )
    reply = await edge.query(question, account.id)
    return json_response(reply["body"], status=reply["status"])


async def get_reputation(request: web.Request) -> web.Response:
    edge = edge_of(request)
    account = guards.reader(request).account
    number = parse_number(unquote(request.match_info["number"]))
    if number is None:
        # The number looked up is a caller's (docs/api.md, Errors names the code).
        raise ApiError(400, "invalid_caller")
    question = ReputationQuestion(account_id=account.id, number=number.e164, now=now_ms())
    reply = await edge.query(question, number.e164)
    return json_response(reply["body"], status=reply["status"])


def add_routes(app: web.Application) -> None:
    app.router.add_get("/v1/calls", list_calls)
    app.router.add_get("/v1/calls/{call_id}", get_call)
    app.router.add_get("/v1/numbers", list_numbers)
    app.router.add_get("/v1/score", get_score)
    app.router.add_get("/v1/reputation/{number}", get_reputation)
    app.router.add_get("/v1/alerts", list_alerts)
    app.router.add_get("/v1/alerts/{alert_id}", get_alert)
