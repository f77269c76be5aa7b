"""GET and PATCH /v1/account."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from domain import commands
from domain.accounts import Account, apply, stamp
from domain.queries import AccountUsage
from domain.rules import DAY_MS
from domain.times import day_start_ms, format_ms
from infra import webhook_url
from infra.clock import now_ms
from ingest import guards
from ingest.errors import ApiError, invalid_field, json_response
from ingest.service import Edge, edge_of


async def account_body(edge: Edge, account: Account) -> dict[str, Any]:
    limits = edge.settings.rules.plans.plan(account.plan)
    today = day_start_ms(now_ms())
    usage = await edge.query(AccountUsage(account_id=account.id, day=today), account.id)
    return {
        "id": account.id,
        "plan": account.plan,
        "alert_webhook_url": account.alert_webhook_url,
        "numbers": {"used": usage["body"]["numbers"], "cap": limits.numbers},
        "scoring": {
            "used_today": usage["body"]["scored_today"],
            "allowance": limits.daily_starts,
            "resets_at": format_ms(today + DAY_MS),
        },
        "created_at": account.created_at,
    }


async def get_account(request: web.Request) -> web.Response:
    principal = guards.reader(request)
    return json_response(await account_body(edge_of(request), principal.account))


async def patch_account(request: web.Request) -> web.Response:
    edge = edge_of(request)
    principal = guards.writer(request)
    body = await guards.json_object(request)
    for name in body:
        if name != "alert_webhook_url":
            raise invalid_field(name)
    account = principal.account
    if "alert_webhook_url" in body:
        url = body["alert_webhook_url"]
        if url is not None and (why := await webhook_url.refusal_under(edge.settings, url)):
            raise ApiError(400, "invalid_webhook_url", reason=why)
        record = stamp(commands.set_webhook(account, url).record, now_ms())
        await edge.append(edge.settings.topic("accounts"), account.id, record)
        apply(edge.accounts, record)
        account = edge.accounts.accounts[account.id]
    return json_response(await account_body(edge, account))


def add_routes(app: web.Application) -> None:
    app.router.add_get("/v1/account", get_account)
    app.router.add_patch("/v1/account", patch_account)
