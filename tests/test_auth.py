"""Credential changes reach a running edge through the log within a second (README, Operate it)."""

from __future__ import annotations

import time

import aiohttp

from callscreen.admin import Admin
from tests.service import AccountKeys, RunningService, wait_for_status

START = {"type": "call.started", "call_id": "c-auth", "to": "+14155552671", "from": "+12125550123"}


async def test_revoked_key_is_refused_within_one_second(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, service: RunningService
) -> None:
    async with Admin(service.settings) as admin:
        extra = await admin.key_create(account.account_id, "full", "ci")
        headers = {"Authorization": f"Bearer {extra['key']}"}
        await wait_for_status(http, "GET", f"{base_url}/v1/account", 200, headers=headers)
        revoked_at = time.monotonic()
        await admin.key_revoke(account.account_id, extra["key_id"])
    await wait_for_status(
        http, "GET", f"{base_url}/v1/account", 401, timeout_s=1.0 - (time.monotonic() - revoked_at), headers=headers
    )
    async with http.get(f"{base_url}/v1/account", headers=account.headers) as r:
        assert r.status == 200


async def test_rotated_ingest_token_stops_working(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, service: RunningService
) -> None:
    async with Admin(service.settings) as admin:
        rotated = await admin.token_rotate(account.account_id, "ingest")
    assert rotated["token"].startswith("cs_ing_")
    await wait_for_status(http, "POST", f"{base_url}/v1/events/{account.ingest_token}", 401, json=START)
    await wait_for_status(http, "POST", f"{base_url}/v1/events/{rotated['token']}", 200, json=START)
