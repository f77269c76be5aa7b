"""GET and PATCH /v1/account: the account's own view, and its webhook URL rules."""

from __future__ import annotations

import aiohttp
import pytest

from tests.service import AccountKeys


async def test_account_shape(http: aiohttp.ClientSession, base_url: str, account: AccountKeys) -> None:
    async with http.get(f"{base_url}/v1/account", headers=account.headers) as r:
        assert r.status == 200
        body = await r.json()
    assert body["id"] == account.account_id
    assert body["plan"] == "guard"
    assert body["alert_webhook_url"] is None
    assert body["numbers"] == {"used": 0, "cap": 25}
    assert body["scoring"]["used_today"] == 0
    assert body["scoring"]["allowance"] == 25000
    assert body["scoring"]["resets_at"].endswith("T00:00:00.000Z")
    assert body["created_at"].endswith("Z")


async def test_watch_plan_limits(http: aiohttp.ClientSession, base_url: str, watch_account: AccountKeys) -> None:
    async with http.get(f"{base_url}/v1/account", headers=watch_account.headers) as r:
        body = await r.json()
    assert body["numbers"]["cap"] == 3
    assert body["scoring"]["allowance"] == 1000


async def test_patch_sets_and_clears_a_public_https_url(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    url = "https://93.184.215.14/hooks/callscreen"
    async with http.patch(f"{base_url}/v1/account", json={"alert_webhook_url": url}, headers=account.headers) as r:
        assert r.status == 200
        assert (await r.json())["alert_webhook_url"] == url
    async with http.get(f"{base_url}/v1/account", headers=account.headers) as r:
        assert (await r.json())["alert_webhook_url"] == url
    async with http.patch(f"{base_url}/v1/account", json={"alert_webhook_url": None}, headers=account.headers) as r:
        assert r.status == 200
        assert (await r.json())["alert_webhook_url"] is None


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://93.184.215.14/hook", "not_https"),
        ("https://127.0.0.1/hook", "private_address"),
        ("https://10.1.2.3/hook", "private_address"),
        ("https://169.254.169.254/latest", "private_address"),
        ("https://[::1]/hook", "private_address"),
        ("ftp://example.com/", "not_https"),
        (42, "not_a_url"),
    ],
)
async def test_patch_refuses_plain_http_and_private_targets(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, url: object, reason: str
) -> None:
    async with http.patch(f"{base_url}/v1/account", json={"alert_webhook_url": url}, headers=account.headers) as r:
        assert r.status == 400
        assert await r.json() == {"error": "invalid_webhook_url", "reason": reason}


async def test_patch_refuses_unknown_fields(http: aiohttp.ClientSession, base_url: str, account: AccountKeys) -> None:
    async with http.patch(f"{base_url}/v1/account", json={"plan": "guard"}, headers=account.headers) as r:
        assert r.status == 400
        assert await r.json() == {"error": "invalid_field", "field": "plan"}
