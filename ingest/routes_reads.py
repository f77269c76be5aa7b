"""Read endpoints (decisions.md section 6): calls, numbers, score, reputation."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from aiohttp import web

from callscreen.phone import Number, parse_number
from callscreen.times import now_ms, parse_ms
from ingest import guards
from ingest.errors import ApiError, invalid_field, json_response
from ingest.service import edge_of
from processors import call_index
from processors.alerts import SEVERITY

ACTIONS = ("allow", "review", "reject")
MAX_LIMIT = 200
DEFAULT_LIMIT = 50


async def get_call(request: web.Request) -> web.Response:
    edge = edge_of(request)
    account = guards.reader(request).account
    call_id = request.match_info["call_id"]
    question = {"q": "call.get", "account_id": account.id, "call_id": call_id}
    reply = await edge.query(question, f"{account.id}:{call_id}")
    if reply["status"] == 200 and "alias_of" in reply["body"]:
        target = reply["body"]["alias_of"]
        reply = await edge.query({**question, "call_id": target}, f"{account.id}:{target}")
    return json_response(reply["body"], status=reply["status"])


def _time_param(request: web.Request, name: str) -> int | None:
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
    question: dict[str, Any] = {"q": "calls.list", "account_id": account.id, "limit": _limit(request)}
    if "number" in request.query:
        number = parse_number(request.query["number"])
        if number is None:
            raise invalid_field("number")
        question["number"] = number.e164
    question["since"] = _time_param(request, "since")
    question["until"] = _time_param(request, "until")
    action = request.query.get("action")
    if action is not None and action not in ACTIONS:
        raise invalid_field("action")
    question["action"] = action
    question["cursor"] = _cursor(request)
    return json_response(merge_pages(await edge.query_all(question), "calls", question["limit"]))


def merge_pages(replies: list[dict[str, Any]], records_key: str, limit: int) -> dict[str, Any]:
    """One page, newest first, from every partition's best `limit + 1` entries."""
    entries: list[call_index.Entry] = []
    records: dict[str, Any] = {}
    for reply in replies:
        entries.extend(reply["body"]["entries"])
        records.update(reply["body"][records_key])
    entries.sort(key=call_index.sort_key, reverse=True)
    page = entries[:limit]
    next_cursor = call_index.encode_cursor(page[-1]) if len(entries) > limit else None
    return {"data": [records[e[1]] for e in page], "next_cursor": next_cursor}


def _cursor(request: web.Request) -> str | None:
    cursor = request.query.get("cursor")
    if cursor is not None and call_index.decode_cursor(cursor) is None:
        raise invalid_field("cursor")
    return cursor


async def list_alerts(request: web.Request) -> web.Response:
    edge = edge_of(request)
    account = guards.reader(request).account
    kind = request.query.get("type")
    if kind is not None and kind not in SEVERITY:
        raise invalid_field("type")
    question: dict[str, Any] = {
        "q": "alerts.list",
        "account_id": account.id,
        "limit": _limit(request),
        "since": _time_param(request, "since"),
        "type": kind,
        "cursor": _cursor(request),
    }
    return json_response(merge_pages(await edge.query_all(question), "alerts", question["limit"]))


async def get_alert(request: web.Request) -> web.Response:
    edge = edge_of(request)
    account = guards.reader(request).account
    question = {"q": "alert.get", "account_id": account.id, "alert_id": request.match_info["alert_id"]}
    reply = await edge.query(question, account.id)
    return json_response(reply["body"], status=reply["status"])


async def list_numbers(request: web.Request) -> web.Response:
    edge = edge_of(request)
    account = guards.reader(request).account
    question = {"q": "numbers", "account_id": account.id, "plan": account.plan, "now": now_ms()}
    reply = await edge.query(question, account.id)
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
    question = {
        "q": "score",
        "account_id": account.id,
        "number": protected.e164,
        "caller": other.e164,
        "at": now_ms(),
        "trusted": other.e164 in account.trusted,
        "attrs": {},
        "number_info": {"country": protected.country, "national": protected.national},
        "caller_info": {
            "country": other.country,
            "national": other.national,
            "valid": other.valid,
            "premium": other.premium,
        },
    }
    reply = await edge.query(question, account.id)
    return json_response(reply["body"], status=reply["status"])


async def get_reputation(request: web.Request) -> web.Response:
    edge = edge_of(request)
    account = guards.reader(request).account
    number = parse_number(unquote(request.match_info["number"]))
    if number is None:
        raise ApiError(400, "invalid_number")
    question = {"q": "reputation", "account_id": account.id, "number": number.e164, "now": now_ms()}
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
