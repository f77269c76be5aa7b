"""Request limits (decisions.md section 5): 429 rate_limited with Retry-After, before body checks."""

from __future__ import annotations

import aiohttp

from callscreen.admin import Admin
from tests.service import AccountKeys, RunningService, wait_for_status

LIMIT_SLACK = 120  # tokens that refill while a burst is being sent


async def burst_until_429(
    http: aiohttp.ClientSession, method: str, url: str, limit: int, **kwargs: object
) -> tuple[int, aiohttp.ClientResponse, dict[str, object]]:
    for sent in range(1, limit + LIMIT_SLACK + 1):
        async with http.request(method, url, **kwargs) as r:  # type: ignore[arg-type]
            if r.status == 429:
                return sent, r, await r.json()
    raise AssertionError(f"no 429 after {limit + LIMIT_SLACK} requests")


async def test_reads_are_limited_per_key(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, service: RunningService
) -> None:
    sent, response, body = await burst_until_429(http, "GET", f"{base_url}/v1/account", 600, headers=account.headers)
    assert sent > 600
    assert body == {"error": "rate_limited", "limit": 600, "window_s": 60}
    assert int(response.headers["Retry-After"]) >= 1
    async with Admin(service.settings) as admin:
        other = await admin.key_create(account.account_id, "read")
    await wait_for_status(
        http, "GET", f"{base_url}/v1/account", 200, headers={"Authorization": f"Bearer {other['key']}"}
    )


async def test_events_are_limited_per_account_across_key_and_token(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    # Bodies are malformed on purpose: the limit is checked before the body, so each one counts.
    for _ in range(600):
        async with http.post(f"{base_url}/v1/events", headers=account.headers, data=b"{") as r:
            assert r.status == 400
    sent, response, body = await burst_until_429(
        http, "POST", f"{base_url}/v1/events/{account.ingest_token}", 600, data=b"{"
    )
    assert sent > 600
    assert body == {"error": "rate_limited", "limit": 1200, "window_s": 60}
    assert int(response.headers["Retry-After"]) >= 1
