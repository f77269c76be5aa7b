"""The log is the truth: `callscreen rebuild` throws the tables away and gets every answer back."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson
import pytest

from callscreen.admin import Admin
from domain import commands
from domain.rules import HOUR_MS, MIN_MS
from infra.settings import Settings
from tests.service import AccountKeys, RunningService, create_account, rebuild, settled, wait_for_status
from tests.topics import read_topic
from tests.traffic import (
    assert_same_answers,
    outbound_in_effect,
    outbound_start,
    past_every_window,
    post_all,
    script,
    snapshot,
)

pytestmark = pytest.mark.slow


@pytest.mark.timeout(300)  # a hang guard: the test drives thousands of events through fresh services
async def test_rebuild_gives_byte_identical_answers_and_no_new_alert_or_delivery(
    log_service: RunningService, http: aiohttp.ClientSession
) -> None:
    base_url, settings = log_service.base_url, log_service.settings
    accounts = [
        await create_account(settings, http, base_url),
        await create_account(settings, http, base_url),
        await create_account(settings, http, base_url, plan="watch"),
    ]
    # One account scores by a policy of its own: a rebuild must score each start by it again.
    async with Admin(settings) as admin:
        await admin.policy_set(accounts[1].account_id, {"thresholds": {"review": 0.3, "reject": 0.6}})
    await policy_in_effect(http, base_url, accounts[1], 0.6)
    base = past_every_window(80)
    plans = [script(1, base, 80), script(2, base, 80), script(3, base, 40)]
    # The accounts side by side, each its events in order: the answers compared are the log's, before and after.
    posted = await asyncio.gather(
        *(post_all(http, base_url, account, bodies) for account, bodies in zip(accounts, plans, strict=True))
    )
    answers = [answer for answers in posted for answer in answers]
    assert len(answers) > 1500
    assert {status for status, _ in answers} <= {200, 402}
    own = {a["thresholds"]["reject"] for status, a in posted[1] if status == 200 and "thresholds" in a}
    assert own == {0.6}
    callers = sorted({b["from"] for b in plans[0] if b["type"] == "call.started"})[:20]
    # One account guards its agents' outbound calls, with settings of its own, and a burst pauses it: a rebuild
    # must answer its outbound starts as they were answered and hold the same pause, raising nothing again.
    guarded = accounts[0]
    async with Admin(settings) as admin:
        await admin.outbound_set(guarded.account_id, {"countries": ["US", "CA"], "transfer": ["+1202555"]})
    await outbound_in_effect(http, base_url, guarded, "+16135550123", [])
    # The allowed country and transfer first: once the burst's alert is folded the account is paused, and a
    # start after the burst could find it paused already or not yet.
    dialled = [
        outbound_start("out-ca", base - HOUR_MS - 2 * MIN_MS, "+16135550123"),
        outbound_start("out-transfer", base - HOUR_MS - MIN_MS, "+12025559999", transfer=True),
    ]
    dialled += [outbound_start(f"out-{i}", base - HOUR_MS + i * MIN_MS, f"+12025550{i + 1}00") for i in range(5)]
    outbound_answers = await post_all(http, base_url, guarded, dialled)
    assert [a["reasons"] for _, a in outbound_answers] == [[], [], [], [], [], [], ["destination_burst"]]
    await outbound_in_effect(http, base_url, guarded, "+19197770801", ["outbound_paused"])
    (_, paused_start), *_ = await post_all(
        http, base_url, guarded, [outbound_start("out-paused", base - HOUR_MS + 6 * MIN_MS, "+19197770801")]
    )
    assert (paused_start["action"], paused_start["reasons"]) == ("reject", ["outbound_paused"])
    async with Admin(settings) as admin:
        outbound_before = await admin.outbound_show(guarded.account_id)
    assert outbound_before["outbound"]["paused"]["cause"] == "outbound.destination_burst"
    # An owner's "send a test alert" (an accounts record a worker turns into one alert.test): raised once.
    async with Admin(settings) as admin:
        await admin.change(
            commands.request_test_alert(admin.account(accounts[0].account_id), "prs_" + "t" * 16, "o@x.test")
        )
    for _ in range(100):
        if await alerts_of_type(settings, "alert.test"):
            break
        await asyncio.sleep(0.1)
    await settled(settings)
    before = [await snapshot(http, base_url, account, callers) for account in accounts]
    assert before[0]["/v1/alerts?limit=200"]["data"], "the traffic should have raised alerts"
    alerts_before = len(await read_topic(settings, settings.topic("alerts")))
    deliveries_before = len(await read_topic(settings, settings.topic("deliveries")))

    done = await rebuild(log_service)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    summary = orjson.loads(done.stdout)
    assert summary["generation"] == 1
    assert summary["records"] >= len(answers)
    assert "partitions" in done.stderr.decode() and "rec/s" in done.stderr.decode()

    await wait_for_status(http, "GET", f"{base_url}/healthz", 200, timeout_s=30)
    await settled(settings)
    after = [await snapshot(http, base_url, account, callers) for account in accounts]
    assert_same_answers(after, before)
    assert len(await read_topic(settings, settings.topic("alerts"))) == alerts_before
    assert len(await alerts_of_type(settings, "alert.test")) == 1
    assert len(await alerts_of_type(settings, "outbound.paused")) == 1
    async with Admin(settings) as admin:
        assert await admin.outbound_show(guarded.account_id) == outbound_before
    assert len(await read_topic(settings, settings.topic("deliveries"))) == deliveries_before


async def policy_in_effect(http: aiohttp.ClientSession, base_url: str, account: AccountKeys, reject: float) -> None:
    """Once the edge scores by the account's new policy (the contract allows a second)."""
    url = f"{base_url}/v1/score?to=%2B14155552671&from=%2B12125550100"
    for _ in range(50):
        async with http.get(url, headers=account.headers) as r:
            if (await r.json())["thresholds"]["reject"] == reject:
                return
        await asyncio.sleep(0.02)
    raise AssertionError("the policy was not in effect within a second")


async def alerts_of_type(settings: Settings, kind: str) -> list[dict[str, Any]]:
    records = [orjson.loads(r.value) for r in await read_topic(settings, settings.topic("alerts"))]
    return [r for r in records if r["type"] == kind]
