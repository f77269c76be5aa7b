"""The outbound guard through the real edge, broker and workers (decisions section 18): each reason of an
outbound start, the settings from the command line, and the kill switch pausing, alerting once, leaving
inbound calls alone and resuming."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import orjson
import pytest

from domain.alerts import alert_id
from domain.rules import SECOND_MS
from tests.service import AccountKeys, RunningService
from tests.test_alerts import NUMBER, Traffic
from tests.test_cli import cli

pytestmark = pytest.mark.pipeline

US = "+12025550143"
CA = "+16135550123"
GB = "+442079460000"
# Distinct numbers under one 8-digit prefix (`+12025550`) that differ before their last two digits, so no
# `rotating_numbers` run forms among them.
RUN = [f"+12025550{i}00" for i in range(1, 8)]
# A number of another prefix than the run's.
ELSEWHERE = "+19197770801"
TIMEOUT_S = 5.0


class Outbound(Traffic):
    async def dial(self, to: str, minute: float, **attrs: Any) -> dict[str, Any]:
        self.seq += 1
        body = {
            "type": "call.started",
            "call_id": f"o{self.seq}",
            "direction": "outbound",
            "from": NUMBER,
            "to": to,
            "at": self.at(minute),
            "attrs": attrs,
        }
        return dict(await self.post(body))

    async def score(self, to: str) -> dict[str, Any]:
        query = f"to={to.replace('+', '%2B')}&from={NUMBER.replace('+', '%2B')}&direction=outbound"
        async with self.http.get(f"{self.base_url}/v1/score?{query}", headers=self.account.headers) as r:
            assert r.status == 200, await r.text()
            return dict(await r.json())

    async def reaches_the_edge(self, to: str, reasons: list[str]) -> None:
        """Once a start to `to` would get `reasons`: a settings or pause record reaches the edge within a
        second. Asked with `GET /v1/score`, which records nothing, so the asking moves no window."""
        deadline = time.monotonic() + TIMEOUT_S
        while (await self.score(to))["reasons"] != reasons:
            assert time.monotonic() < deadline, f"a start to {to} never got {reasons}"
            await asyncio.sleep(0.05)

    async def burst(self, minute: float, count: int = 5) -> list[dict[str, Any]]:
        return [await self.dial(number, minute + i * 0.5) for i, number in enumerate(RUN[:count])]


def outbound(http: aiohttp.ClientSession, service: RunningService, account: AccountKeys) -> Outbound:
    return Outbound(http, service, account)


async def test_each_outbound_reason_end_to_end_and_the_settings_from_the_command_line(
    http: aiohttp.ClientSession, account: AccountKeys, service: RunningService
) -> None:
    t = outbound(http, service, account)
    # The default: the protected number's country only, no transfer, the kill switch on.
    allowed = await t.dial(US, 0)
    assert (allowed["action"], allowed["reasons"]) == ("allow", [])
    assert (allowed["checks"]["destination_numbers_10m"], allowed["checks"]["one_rings_24h"]) == (1, 0)
    foreign = await t.dial(GB, 1)
    assert (foreign["score"], foreign["action"], foreign["reasons"]) == (1.0, "reject", ["destination_not_allowed"])
    transfer = await t.dial(US, 2, transfer=True)
    assert (transfer["score"], transfer["action"], transfer["reasons"]) == (1.0, "reject", ["transfer_not_allowed"])
    premium = await t.dial("+19005550100", 3)
    assert (premium["score"], premium["action"], premium["reasons"]) == (0.85, "reject", ["premium_rate_destination"])

    args = ["outbound", "set", "--account", account.account_id, "--countries", "us,CA", "--transfer", "+1202555"]
    code, out, _ = await cli(service, *args, "--pause-on", "off")
    settings = {"countries": ["CA", "US"], "transfer": ["+1202555"], "pause_on": "off", "paused": None}
    assert (code, out) == (0, {"account_id": account.account_id, "outbound": settings})
    code, shown, _ = await cli(service, "outbound", "show", "--account", account.account_id)
    assert (code, shown) == (0, out)
    await t.reaches_the_edge(CA, [])
    assert (await t.dial(CA, 4))["action"] == "allow"
    assert (await t.dial(US, 5, transfer=True))["reasons"] == []
    assert (await t.dial("+19197770801", 6, transfer=True))["reasons"] == ["transfer_not_allowed"]
    assert (await t.dial(GB, 7))["reasons"] == ["destination_not_allowed"]

    # A number that rang the account and hung up within 5 s, called back; one that rang for 6 s is not.
    for caller, rang_s in (("+12025550177", 5), ("+12025550188", 6)):
        started = await t.start(caller, 10)
        await t.end(started["call_id"], 10 + rang_s * SECOND_MS / 60_000, reason="no-answer")
    await t.settle()
    callback = await t.dial("+12025550177", 20)
    assert (callback["score"], callback["action"], callback["reasons"]) == (0.6, "review", ["callback_to_one_ring"])
    assert callback["checks"]["one_rings_24h"] == 1
    assert (await t.dial("+12025550188", 21))["reasons"] == []

    # Traffic pumping: the fifth distinct number under one prefix in 10 minutes, one alert per cooldown.
    run = await t.burst(40)
    assert [a["reasons"] for a in run] == [[], [], [], [], ["destination_burst"]]
    assert [a["checks"]["destination_numbers_10m"] for a in run] == [1, 2, 3, 4, 5]
    assert (run[4]["score"], run[4]["action"]) == (0.75, "review")
    (alert,) = await t.wait_for("outbound.destination_burst")
    assert alert["severity"] == "threat"
    assert alert["id"] == alert_id(
        account.account_id, "outbound.destination_burst", f"{NUMBER}|+12025550", t.base + 42 * 60_000
    )
    assert alert["data"] == {
        "number": NUMBER,
        "call_id": run[4]["call_id"],
        "prefix": "+12025550",
        "numbers": RUN[:5],
        "count": 5,
        "window_min": 10,
    }
    assert (await t.dial(RUN[5], 43))["reasons"] == ["destination_burst"]
    # The kill switch is off: no pause.
    assert len(await t.none_of("outbound.destination_burst")) == 1
    assert await t.alerts("outbound.paused") == []

    code, out, err = await cli(service, "outbound", "set", "--account", account.account_id, "--countries", "USA")
    assert (code != 0, out, orjson.loads(err)) == (True, None, {"error": "invalid_field", "field": "countries"})
    code, out, err = await cli(service, "outbound", "set", "--account", account.account_id, "--transfer", "1415")
    assert (code != 0, orjson.loads(err)) == (True, {"error": "invalid_field", "field": "transfer"})
    code, out, err = await cli(service, "outbound", "resume", "--account", account.account_id)
    assert (code != 0, orjson.loads(err)) == (True, {"error": "not_paused"})
    code, restored, _ = await cli(service, "outbound", "set", "--account", account.account_id, "--countries", "")
    assert (code, restored["outbound"]["countries"], restored["outbound"]["transfer"]) == (0, None, ["+1202555"])


async def test_a_bad_transfer_flag_is_refused_naming_the_field(
    http: aiohttp.ClientSession, account: AccountKeys, service: RunningService
) -> None:
    t = outbound(http, service, account)
    body = {"type": "call.started", "call_id": "bad", "direction": "outbound", "from": NUMBER, "to": US}
    async with http.post(
        f"{t.base_url}/v1/events", json={**body, "attrs": {"transfer": "yes"}}, headers=account.headers
    ) as r:
        assert (r.status, await r.json()) == (400, {"error": "invalid_field", "field": "attrs.transfer"})


async def test_a_burst_pauses_outbound_once_leaves_inbound_alone_and_resumes(
    http: aiohttp.ClientSession, account: AccountKeys, service: RunningService
) -> None:
    t = outbound(http, service, account)
    await t.burst(0)
    (burst,) = await t.wait_for("outbound.destination_burst")
    (paused,) = await t.wait_for("outbound.paused")
    assert paused["severity"] == "critical"
    assert paused["data"] == {"number": NUMBER, "cause": "outbound.destination_burst", "alert_id": burst["id"]}
    await t.reaches_the_edge(ELSEWHERE, ["outbound_paused"])
    answer = await t.dial(ELSEWHERE, 5)
    assert (answer["score"], answer["action"], answer["reasons"]) == (1.0, "reject", ["outbound_paused"])
    inbound = await t.start(US, 6)
    assert (inbound["action"], inbound["reasons"]) == ("allow", [])
    # More of the run while paused: the burst is within its cooldown, and the pause raises nothing more.
    await t.dial(RUN[5], 6)
    await t.dial(RUN[6], 7)
    assert len(await t.none_of("outbound.paused")) == 1
    code, shown, _ = await cli(service, "outbound", "show", "--account", account.account_id)
    assert code == 0
    assert shown["outbound"]["paused"] == {
        "alert_id": burst["id"],
        "cause": "outbound.destination_burst",
        "number": NUMBER,
        "at": burst["created_at"],
    }
    code, resumed, _ = await cli(service, "outbound", "resume", "--account", account.account_id)
    assert (code, resumed["outbound"]["paused"]) == (0, None)
    await t.reaches_the_edge(ELSEWHERE, [])
    after = await t.dial(ELSEWHERE, 20)
    assert (after["action"], after["reasons"]) == ("allow", [])


async def test_outbound_spend_past_the_ceiling_pauses_outbound(
    http: aiohttp.ClientSession, account: AccountKeys, service: RunningService
) -> None:
    t = outbound(http, service, account)
    t.base -= t.base % 3_600_000
    for i, cost in enumerate((10.0, 10.0, 5.01)):
        answer = await t.dial(f"+1917555{i:04d}", i)
        await t.end(answer["call_id"], i + 0.5, cost=cost)
    (spend,) = await t.wait_for("number.spend_exceeded")
    assert spend["data"] == {
        "number": NUMBER,
        "spend": 25.01,
        "ceiling": 25.0,
        "usual": 0.0,
        "calls": 3,
        "direction": "outbound",
    }
    (paused,) = await t.wait_for("outbound.paused")
    assert paused["data"] == {"number": NUMBER, "cause": "number.spend_exceeded", "alert_id": spend["id"]}
    await t.reaches_the_edge(US, ["outbound_paused"])
    assert (await t.dial(US, 5))["action"] == "reject"
