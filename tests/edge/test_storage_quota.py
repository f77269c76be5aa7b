"""Per-account storage quota: accepted event bodies count against a daily byte allowance; past it the
account gets 429 `quota_exceeded` until midnight UTC, and other accounts are untouched.

On the old code an account within its rate limit could add about 1 GB a day to the log.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import aiohttp
import msgspec
import pytest
from aiohttp.test_utils import TestServer

from callscreen.testing import MemoryLog
from domain import commands
from domain.accounts import stamp
from domain.rules import DAY_MS, LimitRules, Rules
from domain.times import format_ms
from infra.clock import now_ms
from infra.settings import Settings
from ingest.app import init_app

QUOTA = 2_000


@pytest.fixture
async def small_quota() -> AsyncIterator[tuple[str, list[dict[str, str]]]]:
    settings = Settings(rules=dataclasses.replace(Rules(), limits=LimitRules(event_bytes_per_day=QUOTA)))
    log = MemoryLog(settings)
    server = TestServer(init_app(settings, log))
    await server.start_server()
    headers = []
    for _ in range(2):
        change = commands.create_account("guard", "test")
        record = stamp(change.record, now_ms())
        await log.append(settings.topic("accounts"), record["account_id"], msgspec.json.encode(record))
        headers.append({"Authorization": f"Bearer {change.shown['key']}"})
    yield str(server.make_url("")).rstrip("/"), headers
    await server.close()


async def test_past_the_daily_bytes_an_account_gets_quota_exceeded_and_others_do_not(
    http: aiohttp.ClientSession, small_quota: tuple[str, list[dict[str, str]]]
) -> None:
    base_url, (first, second) = small_quota
    statuses = []
    refusal = {}
    for i in range(30):
        body = {"type": "call.started", "call_id": f"q-{i}", "to": "+14155552671", "from": "+12125550123"}
        async with http.post(f"{base_url}/v1/events", json=body, headers=first) as r:
            statuses.append(r.status)
            if r.status == 429:
                refusal = {"body": await r.json(), "retry_after": int(r.headers["Retry-After"])}
                break
    accepted = statuses.count(200)
    assert statuses == [200] * accepted + [429] and 10 < accepted < 30
    midnight = (now_ms() // DAY_MS + 1) * DAY_MS
    assert refusal["body"] == {"error": "quota_exceeded", "limit": QUOTA, "resets_at": format_ms(midnight)}
    assert 0 < refusal["retry_after"] <= 86_400
    # A bad body is refused for what it is, and costs nothing.
    async with http.post(f"{base_url}/v1/events", json={"type": "call.started"}, headers=first) as r:
        assert (r.status, await r.json()) == (400, {"error": "missing_call_id"})
    other = {"type": "call.started", "call_id": "other-1", "to": "+14155552671", "from": "+12125550123"}
    async with http.post(f"{base_url}/v1/events", json=other, headers=second) as r:
        assert r.status == 200
