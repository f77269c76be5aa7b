"""Request limits (docs/api.md, Limits): 429 rate_limited with Retry-After, before body checks."""

from __future__ import annotations

import time
from pathlib import Path

import aiohttp

from callscreen.admin import Admin
from tests.service import AccountKeys, RunningService, start_service, wait_for_status

BURST_TIMEOUT_S = 90.0


async def burst_until_429(
    http: aiohttp.ClientSession,
    method: str,
    url: str,
    limit: int,
    sent: int = 0,
    started: float | None = None,
    **kwargs: object,
) -> tuple[int, aiohttp.ClientResponse, dict[str, object]]:
    """Requests until the first 429; checks it came after the bucket, plus what refilled meanwhile.

    `sent` requests already spent from the same bucket since `started`.
    """
    started = time.monotonic() if started is None else started
    while time.monotonic() - started < BURST_TIMEOUT_S:
        sent += 1
        async with http.request(method, url, **kwargs) as r:  # type: ignore[arg-type]
            if r.status == 429:
                refilled = (time.monotonic() - started) * limit / 60
                assert limit < sent <= limit + refilled + 1
                return sent, r, await r.json()
    raise AssertionError(f"no 429 after {sent} requests in {BURST_TIMEOUT_S}s")


async def test_reads_are_limited_per_key(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, service: RunningService
) -> None:
    _, response, body = await burst_until_429(http, "GET", f"{base_url}/v1/account", 600, headers=account.headers)
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
    started = time.monotonic()
    for _ in range(600):
        async with http.post(f"{base_url}/v1/events", headers=account.headers, data=b"{") as r:
            assert r.status == 400
    url = f"{base_url}/v1/events/{account.ingest_token}"
    _, response, body = await burst_until_429(http, "POST", url, 1200, sent=600, started=started, data=b"{")
    assert body == {"error": "rate_limited", "limit": 1200, "window_s": 60}
    assert int(response.headers["Retry-After"]) >= 1


async def test_two_edges_hold_one_account_limit_within_ten_percent(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, service: RunningService, tmp_path: Path
) -> None:
    second = start_service(tmp_path / "edge", service.settings.broker, "--role", "edge", env=service.env)
    try:
        urls = [f"{base_url}/v1/events", f"{second.base_url}/v1/events"]
        started, sent, admitted = time.monotonic(), 0, [0, 0]
        while time.monotonic() - started < BURST_TIMEOUT_S:
            # Alternate edges, as a load balancer would; each malformed body counts against the account.
            edge = sent % 2
            sent += 1
            async with http.post(urls[edge], headers=account.headers, data=b"{") as r:
                if r.status == 429:
                    break
                assert r.status == 400
                admitted[edge] += 1
        else:
            raise AssertionError(f"no 429 after {sent} requests")
        refilled = (time.monotonic() - started) * 1200 / 60
        assert 1200 < sent <= 1.1 * 1200 + refilled
        assert min(admitted) > 500, admitted
    finally:
        assert second.stop() == 0
