"""Health, metrics, and structured logs that never carry a secret."""

from __future__ import annotations

import aiohttp
import orjson

from tests.service import AccountKeys, RunningService


async def test_healthz_is_ok_without_credentials(http: aiohttp.ClientSession, base_url: str) -> None:
    async with http.get(f"{base_url}/healthz") as r:
        assert r.status == 200
        assert await r.json() == {"status": "ok"}


async def test_metrics_count_requests_events_and_admin_changes(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    start = {"type": "call.started", "call_id": "m-1", "to": "+14155552671", "from": "+12125550123"}
    async with http.post(f"{base_url}/v1/events", json=start, headers=account.headers) as r:
        assert r.status == 200
    async with http.get(f"{base_url}/metrics") as r:
        assert r.status == 200
        text = await r.text()
    assert 'callscreen_http_requests_total{method="POST",route="/v1/events",status="200"}' in text
    assert 'callscreen_http_request_seconds_bucket{le="0.005",method="POST",route="/v1/events",status="200"}' in text
    assert 'callscreen_events_appended_total{type="call.started"}' in text
    assert 'callscreen_admin_changes_applied_total{kind="account.created"}' in text


async def test_every_response_has_a_request_id(http: aiohttp.ClientSession, base_url: str) -> None:
    async with http.get(f"{base_url}/healthz", headers={"X-Request-Id": "req-123"}) as r:
        assert r.headers["X-Request-Id"] == "req-123"
    async with http.get(f"{base_url}/healthz") as r:
        assert len(r.headers["X-Request-Id"]) == 32


async def test_logs_are_json_lines_without_secrets(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, service: RunningService
) -> None:
    async with http.get(f"{base_url}/v1/account", headers={"X-Request-Id": "log-probe", **account.headers}) as r:
        assert r.status == 200
    async with http.post(f"{base_url}/v1/events/{account.ingest_token}", data=b"{") as r:
        assert r.status == 400
    log_file = service.data_dir.parent / f"{service.data_dir.name}.log"
    # Every line, the worker's start included: a reader of JSON lines loses whatever does not parse.
    entries = [orjson.loads(line) for line in log_file.read_text().splitlines()]
    assert entries
    # The line per request is at debug (tests/edge/test_request_log.py); the service logs at info.
    assert not any(e.get("request_id") == "log-probe" for e in entries)
    text = log_file.read_text()
    for secret in (account.key, account.ingest_token, account.signing_secret):
        assert secret not in text
