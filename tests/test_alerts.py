"""Detectors, alerts, blocks and cooldowns through the real pipeline (docs/rules.md, Detectors)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import jsonschema
import orjson
import pytest

import schemas
from callscreen.admin import Admin
from domain.alerts import alert_id
from domain.times import format_ms
from infra.clock import now_ms
from tests.service import AccountKeys, RunningService, settled
from tests.topics import read_topic

pytestmark = pytest.mark.slow

NUMBER = "+14155552671"
MIN = 60_000


class Traffic:
    def __init__(self, http: aiohttp.ClientSession, service: RunningService, account: AccountKeys) -> None:
        self.http, self.service, self.account = http, service, account
        self.base_url = service.base_url
        self.base = now_ms() - 5 * 3_600_000
        self.seq = 0

    def at(self, minute: float) -> str:
        return format_ms(self.base + int(minute * MIN))

    async def post(self, body: dict[str, Any]) -> Any:
        """Post one event; it must be answered 200."""
        async with self.http.post(f"{self.base_url}/v1/events", json=body, headers=self.account.headers) as r:
            assert r.status == 200, await r.text()
            return await r.json()

    async def start(self, caller: str, minute: float, **fields: Any) -> Any:
        self.seq += 1
        body = {"type": "call.started", "call_id": f"t{self.seq}", "to": NUMBER, "from": caller, "at": self.at(minute)}
        return await self.post({**body, **fields})

    async def end(self, call_id: str, minute: float, **fields: Any) -> Any:
        return await self.post({"type": "call.ended", "call_id": call_id, "at": self.at(minute), **fields})

    async def turn(self, call_id: str, minute: float, **fields: Any) -> Any:
        body = {"type": "turn.started", "call_id": call_id, "role": "user", "at": self.at(minute)}
        return await self.post({**body, **fields})

    async def alerts(self, kind: str | None = None) -> list[dict[str, Any]]:
        url = f"{self.base_url}/v1/alerts?limit=200" + (f"&type={kind}" if kind else "")
        async with self.http.get(url, headers=self.account.headers) as r:
            assert r.status == 200
            return list((await r.json())["data"])

    async def wait_for(self, kind: str, count: int = 1, timeout_s: float = 5.0) -> list[dict[str, Any]]:
        """The alerts of one type once `count` exist; detectors run behind the answer path."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = await self.alerts(kind)
            if len(found) >= count or time.monotonic() > deadline:
                return found
            await asyncio.sleep(0.1)

    async def settle(self) -> None:
        """Wait until the service has folded everything posted so far."""
        await settled(self.service.settings)

    async def none_of(self, kind: str) -> list[dict[str, Any]]:
        """The alerts of one type once the service has folded everything posted so far: a check for none."""
        await self.settle()
        return await self.alerts(kind)


def traffic(http: aiohttp.ClientSession, service: RunningService, account: AccountKeys) -> Traffic:
    return Traffic(http, service, account)


async def test_rate_exceeded_once_then_blocked(
    http: aiohttp.ClientSession, account: AccountKeys, service: RunningService
) -> None:
    t = traffic(http, service, account)
    caller = "+447911200001"
    for i in range(5):
        await t.start(caller, i)
    assert await t.none_of("caller.rate_exceeded") == []
    sixth = await t.start(caller, 5)
    assert "rate_exceeded" in sixth["reasons"]
    (alert,) = await t.wait_for("caller.rate_exceeded")
    assert alert["data"] == {
        "number": NUMBER,
        "caller": caller,
        "call_id": "t6",
        "count": 6,
        "window_min": 10,
        # The caller's fifth call, the one before this: scored 0 today.
        "prior": {"score": 0, "days": 0},
    }
    assert alert["severity"] == "threat"
    assert alert["id"] == alert_id(account.account_id, "caller.rate_exceeded", f"{caller}|{NUMBER}", t.base + 5 * MIN)
    assert alert["delivered"] == {"webhook": False}
    seventh = await t.start(caller, 6)
    assert (seventh["action"], seventh["score"], seventh["reasons"]) == ("reject", 1.0, ["blocked"])
    assert seventh["block"]["reason"] == "caller.rate_exceeded"
    assert seventh["block"]["alert_id"] == alert["id"]
    assert seventh["block"]["until"] == format_ms(t.base + 65 * MIN)
    await t.start(caller, 7)
    await t.settle()
    assert len(await t.alerts("caller.rate_exceeded")) == 1
    other = await t.start("+447911200099", 7)
    assert other["block"] is None
    after_block = await t.start(caller, 70)
    assert after_block["block"] is None


async def test_rotating_numbers_burst_gives_one_alert_and_blocks_the_run(
    http: aiohttp.ClientSession, account: AccountKeys, service: RunningService
) -> None:
    t = traffic(http, service, account)
    run = [f"+1212555{7000 + i}" for i in range(30)]
    for i, caller in enumerate(run):
        await t.start(caller, i * 0.2)
    found = await t.wait_for("caller.rotating_numbers")
    await t.settle()
    found = await t.alerts("caller.rotating_numbers")
    assert len(found) == 1, [(a["id"], a["created_at"], a["data"]) for a in found]
    data = found[0]["data"]
    assert data["pattern"] == "+121255570XX"
    assert data["numbers"] == run[:4] and data["count"] == 4 and data["window_min"] == 10
    assert found[0]["severity"] == "critical"
    again = await t.start(run[1], 7)
    assert again["action"] == "reject" and again["block"]["reason"] == "caller.rotating_numbers"
    newcomer = await t.start("+12125557088", 7.5)
    assert "rotating_numbers" in newcomer["reasons"]


async def test_prefix_cluster_of_fresh_callers(
    http: aiohttp.ClientSession, account: AccountKeys, service: RunningService
) -> None:
    t = traffic(http, service, account)
    callers = [f"+13125551{i}0{i}" for i in range(10)]
    for i, caller in enumerate(callers[:9]):
        await t.start(caller, i)
    assert await t.none_of("number.prefix_cluster") == []
    await t.start(callers[9], 9)
    (alert,) = await t.wait_for("number.prefix_cluster")
    assert alert["data"] == {"number": NUMBER, "call_id": "t10", "pattern": "+13125551*", "count": 10, "window_min": 30}
    inside = await t.start("+13125551999", 10)
    assert "prefix_cluster" in inside["reasons"]


async def test_country_burst_from_a_new_country(
    http: aiohttp.ClientSession, account: AccountKeys, service: RunningService
) -> None:
    t = traffic(http, service, account)
    for i in range(9):
        await t.start(f"+3361234{i}{i}{i}{i}", i)
    assert await t.none_of("number.country_burst") == []
    await t.start("+33612349999", 9)
    (alert,) = await t.wait_for("number.country_burst")
    assert alert["data"] == {"number": NUMBER, "call_id": "t10", "country": "FR", "count": 10, "window_min": 15}
    inside = await t.start("+33698765432", 10)
    assert "country_burst" in inside["reasons"]


async def test_geo_cluster_of_fresh_callers_in_one_zip(
    http: aiohttp.ClientSession, account: AccountKeys, service: RunningService
) -> None:
    t = traffic(http, service, account)
    geo = {"zip": "73301", "city": "Austin", "region": "TX", "country": "US"}
    callers = [f"+1512{i}{i}{i}0{i}{i}{i}" for i in range(2, 7)]
    for i, caller in enumerate(callers[:4]):
        await t.start(caller, i, attrs={"geo": geo})
    assert await t.none_of("number.geo_cluster") == []
    await t.start(callers[4], 4, attrs={"geo": geo})
    (alert,) = await t.wait_for("number.geo_cluster")
    assert alert["data"] == {
        "number": NUMBER,
        "call_id": "t5",
        "zip": "73301",
        "city": "Austin",
        "region": "TX",
        "numbers": sorted(callers),
        "count": 5,
        "window_min": 30,
    }


async def test_volume_exceeded_past_120_calls_an_hour(
    http: aiohttp.ClientSession, account: AccountKeys, service: RunningService
) -> None:
    t = traffic(http, service, account)
    for i in range(120):
        await t.start(f"+1646{i:03d}{i:04d}", i * 0.45)
    assert await t.none_of("number.volume_exceeded") == []
    await t.start("+16469990000", 55)
    (alert,) = await t.wait_for("number.volume_exceeded")
    assert alert["data"] == {"number": NUMBER, "call_id": "t121", "count": 121}


async def test_volume_spike_and_its_end(
    http: aiohttp.ClientSession, account: AccountKeys, service: RunningService
) -> None:
    t = traffic(http, service, account)
    t.base -= t.base % 3_600_000
    for i in range(19):
        await t.start(f"+1718{i:03d}{i:04d}", i)
    assert await t.none_of("number.volume_spike") == []
    await t.start("+17189990000", 30)
    (spike,) = await t.wait_for("number.volume_spike")
    assert spike["data"] == {"number": NUMBER, "calls": 20, "callers": 20, "expected": 5.0}
    await t.start("+17189990001", 125)
    (normal,) = await t.wait_for("number.volume_normal")
    assert normal["data"] == {"number": NUMBER, "minutes": 95, "peak": 20, "expected": 5.0}
    assert normal["severity"] == "info"


async def test_spend_exceeded_in_an_hour(
    http: aiohttp.ClientSession, account: AccountKeys, service: RunningService
) -> None:
    t = traffic(http, service, account)
    t.base -= t.base % 3_600_000
    for i, cost in enumerate((10.0, 10.0, 5.0, 0.01)):
        await t.start(f"+1917555{i:04d}", i)
        await t.end(f"t{i + 1}", i + 1, cost=cost)
        if i == 2:
            assert await t.none_of("number.spend_exceeded") == []
    (alert,) = await t.wait_for("number.spend_exceeded")
    assert alert["data"] == {"number": NUMBER, "spend": 25.01, "ceiling": 25.0, "usual": 0.0, "calls": 4}


async def test_long_running_call_from_the_sweep(
    http: aiohttp.ClientSession, account: AccountKeys, service: RunningService
) -> None:
    t = traffic(http, service, account)
    # Started 29m57s ago; its platform reports it as it happens (a turn of now), so the sweep ticks it as
    # soon as it passes its ceiling, 3 s from now (`domain.calls.tick_after`).
    t.base = now_ms() - 30 * MIN + 3_000
    await t.start("+19175550999", 0)
    assert (await t.turn("t1", 29.95))["flags"] == []
    (alert,) = await t.wait_for("call.long_running", timeout_s=10.0)
    assert alert["data"]["call_id"] == "t1"
    # The sweep's tick is at the time the call passed its ceiling, in event time, not when the sweep ran.
    assert alert["data"]["ceiling_min"] == 30 and alert["data"]["minutes"] == 30
    assert alert["data"]["started_at"] == format_ms(t.base)
    assert alert["created_at"] == format_ms(t.base + 30 * MIN)


async def test_billing_payment_failed(
    http: aiohttp.ClientSession, account: AccountKeys, service: RunningService
) -> None:
    t = traffic(http, service, account)
    async with Admin(service.settings) as admin:
        await admin.payment_failed(account.account_id, 4900, 2)
    (alert,) = await t.wait_for("billing.payment_failed", timeout_s=15.0)
    assert alert["data"] == {"amount_cents": 4900, "attempt": 2}
    assert alert["severity"] == "info"


async def test_quiet_imports_raise_nothing_and_block_nothing(
    http: aiohttp.ClientSession, account: AccountKeys, service: RunningService
) -> None:
    t = traffic(http, service, account)
    caller = "+447911200002"
    for i in range(8):
        answer = await t.start(caller, i, quiet=True)
    assert "rate_exceeded" in answer["reasons"]
    await t.settle()
    assert await t.alerts() == []
    assert answer["block"] is None


async def test_alert_listing_filters_cursor_and_isolation(
    http: aiohttp.ClientSession,
    base_url: str,
    account: AccountKeys,
    watch_account: AccountKeys,
    service: RunningService,
) -> None:
    t = traffic(http, service, account)
    for i in range(3):
        await t.start("+447911200003", i * 20)
        for j in range(5):
            await t.start("+447911200003", i * 20 + 1 + j)
    rate = await t.wait_for("caller.rate_exceeded", count=3)
    assert len(rate) == 3
    assert [a["created_at"] for a in rate] == sorted((a["created_at"] for a in rate), reverse=True)
    async with http.get(f"{base_url}/v1/alerts?limit=2&type=caller.rate_exceeded", headers=account.headers) as r:
        first = await r.json()
    async with http.get(
        f"{base_url}/v1/alerts?limit=2&type=caller.rate_exceeded&cursor={first['next_cursor']}", headers=account.headers
    ) as r:
        second = await r.json()
    assert [a["id"] for a in first["data"] + second["data"]] == [a["id"] for a in rate]
    assert second["next_cursor"] is None
    since = rate[0]["created_at"]
    async with http.get(f"{base_url}/v1/alerts?since={since}&type=caller.rate_exceeded", headers=account.headers) as r:
        assert [a["id"] for a in (await r.json())["data"]] == [rate[0]["id"]]
    async with http.get(f"{base_url}/v1/alerts/{rate[1]['id']}", headers=account.headers) as r:
        assert (r.status, await r.json()) == (200, rate[1])
    async with http.get(f"{base_url}/v1/alerts/{rate[1]['id']}", headers=watch_account.headers) as r:
        assert (r.status, await r.json()) == (404, {"error": "not_found"})
    async with http.get(f"{base_url}/v1/alerts?type=caller.nope", headers=account.headers) as r:
        assert (r.status, await r.json()) == (400, {"error": "invalid_field", "field": "type"})


async def test_alerts_topic_validates_against_the_published_schema(
    http: aiohttp.ClientSession, account: AccountKeys, service: RunningService
) -> None:
    t = traffic(http, service, account)
    for i in range(6):
        await t.start("+447911200004", i)
    await t.wait_for("caller.rate_exceeded")
    validator = jsonschema.Draft202012Validator(schemas.load("alert.schema.json"))
    records = await read_topic(service.settings, service.settings.topic("alerts"))
    alerts = [orjson.loads(r.value) for r in records]
    assert any(a["account_id"] == account.account_id for a in alerts)
    for record, alert in zip(records, alerts, strict=True):
        validator.validate(alert)
        assert record.key == alert["account_id"].encode()
