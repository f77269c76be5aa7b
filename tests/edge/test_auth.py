"""Credentials at the edge: keys, scopes, ingest tokens and isolation (docs/api.md, Credentials)."""

from __future__ import annotations

import asyncio

import aiohttp

from domain import commands
from tests.edge.conftest import EdgeUnderTest
from tests.service import AccountKeys, wait_for_status

START = {"type": "call.started", "call_id": "c-auth", "to": "+14155552671", "from": "+12125550123"}


async def test_missing_key_is_401_with_challenge(http: aiohttp.ClientSession, base_url: str) -> None:
    async with http.get(f"{base_url}/v1/account") as r:
        assert r.status == 401
        assert await r.json() == {"error": "missing_key"}
        assert r.headers["WWW-Authenticate"] == "Bearer"


async def test_unknown_and_malformed_keys_are_invalid_key(http: aiohttp.ClientSession, base_url: str) -> None:
    for key in ("cs_live_" + "A" * 32, "nonsense", "cs_live_short", ""):
        async with http.get(f"{base_url}/v1/account", headers={"Authorization": f"Bearer {key}"}) as r:
            assert r.status == 401, key
            assert (await r.json())["error"] == "invalid_key"


async def test_bearer_and_service_key_header_both_work(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    async with http.get(f"{base_url}/v1/account", headers={"Authorization": f"Bearer {account.key}"}) as r:
        assert r.status == 200
        assert (await r.json())["id"] == account.account_id
    async with http.get(f"{base_url}/v1/account", headers={"X-Service-Key": account.key}) as r:
        assert r.status == 200
        assert (await r.json())["id"] == account.account_id


async def test_service_key_header_counts_beside_another_authorization(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    basic = {"Authorization": "Basic dXNlcjpwYXNz", "X-Service-Key": account.key}
    async with http.get(f"{base_url}/v1/account", headers=basic) as r:
        assert r.status == 200
        assert (await r.json())["id"] == account.account_id
    async with http.get(f"{base_url}/v1/account", headers={"Authorization": "Basic dXNlcjpwYXNz"}) as r:
        assert (r.status, await r.json()) == (401, {"error": "invalid_key"})
    # A Bearer key is the credential when both are sent: a wrong one is refused, whatever the other says.
    both = {"Authorization": "Bearer cs_live_" + "A" * 32, "X-Service-Key": account.key}
    async with http.get(f"{base_url}/v1/account", headers=both) as r:
        assert (r.status, await r.json()) == (401, {"error": "invalid_key"})


async def test_read_key_reads_but_never_writes(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, edge: EdgeUnderTest
) -> None:
    read = await edge.change(commands.create_key(edge.accounts.accounts[account.account_id], "read", "dashboard"))
    assert read["key"].startswith("cs_read_")
    headers = {"Authorization": f"Bearer {read['key']}"}
    await wait_for_status(http, "GET", f"{base_url}/v1/account", 200, headers=headers)
    async with http.post(f"{base_url}/v1/events", json=START, headers=headers) as r:
        assert r.status == 403
        assert await r.json() == {"error": "read_only_key"}
    async with http.patch(f"{base_url}/v1/account", json={"alert_webhook_url": None}, headers=headers) as r:
        assert r.status == 403
        assert await r.json() == {"error": "read_only_key"}


async def test_ingest_token_posts_events_and_reads_nothing(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    token = account.ingest_token
    async with http.post(f"{base_url}/v1/events/{token}", json=START) as r:
        assert r.status == 200
        assert (await r.json())["call_id"] == "c-auth"
    async with http.get(f"{base_url}/v1/account", headers={"Authorization": f"Bearer {token}"}) as r:
        assert r.status == 401
        assert (await r.json())["error"] == "invalid_key"
    async with http.get(f"{base_url}/v1/events/{token}") as r:
        assert r.status == 405
        assert (await r.json())["error"] == "method_not_allowed"
    async with http.get(f"{base_url}/v1/account/{token}") as r:
        assert r.status == 404
        assert (await r.json())["error"] == "not_found"


async def test_unknown_ingest_token_is_invalid_token(http: aiohttp.ClientSession, base_url: str) -> None:
    for token in ("cs_ing_" + "B" * 32, "whatever"):
        async with http.post(f"{base_url}/v1/events/{token}", json=START) as r:
            assert r.status == 401
            assert await r.json() == {"error": "invalid_token"}


async def test_one_account_never_sees_another(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, watch_account: AccountKeys
) -> None:
    other = {**START, "call_id": "private-call"}
    async with http.post(f"{base_url}/v1/events", json=other, headers=account.headers) as r:
        assert r.status == 200
    mine, theirs = await asyncio.gather(
        http.get(f"{base_url}/v1/account", headers=account.headers),
        http.get(f"{base_url}/v1/account", headers=watch_account.headers),
    )
    assert (await mine.json())["id"] == account.account_id
    body = await theirs.json()
    assert body["id"] == watch_account.account_id
    assert body["numbers"]["used"] == 0
    mine.release()
    theirs.release()
