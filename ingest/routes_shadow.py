"""POST /v1/shadow and GET /v1/shadow/<id> (decisions section 17): a candidate policy run over the account's
window by the shadow role, asked for and read back on the shadow topic, which this edge follows."""

from __future__ import annotations

import secrets
from typing import Any

from aiohttp import web

from domain.accounts import Account
from domain.policy import PolicyError, parse_policy
from domain.shadow import MAX_WINDOW_MS, Request, csv_of, requested
from domain.times import parse_ms
from infra.clock import now_ms
from ingest import guards
from ingest.errors import ApiError, invalid_field, json_response
from ingest.service import Edge, edge_of


def parse_request(body: dict[str, Any], account: Account, edge: Edge) -> Request:
    """The run a body asks for, or 400 `invalid_field` naming the first field refused."""
    since, until = parse_ms(body.get("since")), parse_ms(body.get("until"))
    if since is None:
        raise invalid_field("since")
    if until is None or until <= since or until - since > MAX_WINDOW_MS:
        raise invalid_field("until")
    try:
        policy = parse_policy(body.get("policy"), edge.settings.rules.scoring)
    except PolicyError as refused:
        raise invalid_field(refused.field) from refused
    return Request(id=f"shd_{secrets.token_hex(8)}", account_id=account.id, since=since, until=until, policy=policy)


async def start_shadow(edge: Edge, account: Account, body: dict[str, Any]) -> dict[str, Any]:
    """Append the request for the shadow role; 409 `shadow_running` while the account has a run not done.
    The dashboard's form posts here too."""
    request = parse_request(body, account, edge)
    if edge.shadows.running(account.id) is not None:
        raise ApiError(409, "shadow_running")
    record = requested(request, now_ms())
    await edge.append(edge.settings.topic("shadow"), account.id, record)
    # Its own next read sees the run, before the follower brings the record back.
    edge.fold_shadow(record)
    return {"id": request.id, "state": "running"}


async def post_shadow(request: web.Request) -> web.Response:
    edge = edge_of(request)
    account = guards.writer(request).account
    body = await guards.json_object(request)
    return json_response(await start_shadow(edge, account, body), status=202)


async def get_shadow(request: web.Request) -> web.Response:
    edge = edge_of(request)
    account = guards.reader(request).account
    run = edge.shadows.of(account.id, request.match_info["shadow_id"])
    if run is None:
        raise ApiError(404, "not_found")
    fmt = request.query.get("format", "json")
    if fmt == "csv":
        return web.Response(
            text=csv_of(run.flipped()),
            content_type="text/csv",
            headers={"Content-Disposition": f'attachment; filename="{run.id}.csv"'},
        )
    if fmt != "json":
        raise invalid_field("format")
    return json_response(run.body())


def add_routes(app: web.Application) -> None:
    app.router.add_post("/v1/shadow", post_shadow)
    app.router.add_get("/v1/shadow/{shadow_id}", get_shadow)
