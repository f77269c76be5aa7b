"""Screening never goes off silently, end to end: while no worker answers, a gated call takes its number's
`unavailable` choice and the edge reports it on the accounts topic (`screening.unavailable`); a worker folds
that report into one `platform.screening_unavailable` alert per account and 15-minute window, which
`GET /v1/alerts` lists and the account's webhook receives, once.

The edge's side alone is tests/edge/test_unscored_gate.py; the alert's id, tests/unit/test_screening_alert.py.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import trustme

from callscreen.admin import Admin
from domain.accounts import stamp
from domain.alerts import SCREENING_LOST, alert_id
from domain.rules import MIN_MS
from domain.times import format_ms, parse_ms
from infra.clock import now_ms
from infra.kafka import make_producer
from tests.receiver import Receiver, receiver_env
from tests.service import AccountKeys, RunningService, create_account, role_pids, running_service, settled

pytestmark = pytest.mark.pipeline

KIND = "platform.screening_unavailable"
WINDOW_MS = 15 * MIN_MS
NUMBER = "+14155550181"
OTHER_NUMBER = "+14155550182"


@pytest.fixture(scope="module")
def hook_service(
    kafka: str, tmp_path_factory: pytest.TempPathFactory, webhook_ca: tuple[trustme.CA, Path]
) -> Iterator[RunningService]:
    with running_service(tmp_path_factory.mktemp("unscreened") / "data", kafka, env=receiver_env(webhook_ca[1])) as s:
        yield s


async def hooked(http: aiohttp.ClientSession, service: RunningService, receiver: Receiver) -> AccountKeys:
    """A fresh account whose alerts go to `receiver`."""
    account = await create_account(service.settings, http, service.base_url)
    body = {"alert_webhook_url": f"{receiver.url}/ok/{account.account_id}"}
    async with http.patch(f"{service.base_url}/v1/account", json=body, headers=account.headers) as r:
        assert r.status == 200, await r.text()
    return account


async def report(service: RunningService, account_id: str, number: str, choice: str, at: int) -> None:
    """What an edge appends for a gated call it answered with no score (ingest.service.Edge.screening_lost)."""
    record = stamp({"kind": SCREENING_LOST, "account_id": account_id, "number": number, "choice": choice}, at)
    producer = make_producer(service.settings)
    await producer.start()
    try:
        await producer.send_and_wait(service.settings.topic("accounts"), orjson.dumps(record), key=account_id.encode())
    finally:
        await producer.stop()


async def listed(http: aiohttp.ClientSession, service: RunningService, account: AccountKeys) -> list[dict[str, Any]]:
    async with http.get(f"{service.base_url}/v1/alerts?type={KIND}", headers=account.headers) as r:
        assert r.status == 200
        return list((await r.json())["data"])


async def until(check: Any, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.1)


def expected(account_id: str, at: int, number: str, choice: str) -> dict[str, Any]:
    """The alert as listed, delivered: its id from the account and the window's start, data from the report."""
    return {
        "id": alert_id(account_id, KIND, account_id, at - at % WINDOW_MS),
        "type": KIND,
        "account_id": account_id,
        "created_at": format_ms(at),
        "severity": "critical",
        "data": {"number": number, "choice": choice},
        "delivered": {"webhook": True},
        "delivery": {"status": 204, "error": None, "duration_ms": pytest.approx(0, abs=8_000)},
    }


def envelope(listed_alert: dict[str, Any]) -> dict[str, Any]:
    return {k: listed_alert[k] for k in ("id", "type", "account_id", "created_at", "data")}


async def test_every_edges_report_of_one_window_makes_one_alert_listed_and_delivered_once(
    hook_service: RunningService, receiver: Receiver, http: aiohttp.ClientSession
) -> None:
    account = await hooked(http, hook_service, receiver)
    # Two windows back, away from any report of the test below: two edges' reports of the same window (one
    # of them of another number), then one of the next window.
    first = now_ms() - 2 * WINDOW_MS
    first -= first % WINDOW_MS
    reports = [
        (first + 60_000, NUMBER, "reject"),
        (first + WINDOW_MS - 1, OTHER_NUMBER, "forward"),
        (first + WINDOW_MS, NUMBER, "forward"),
    ]
    for at, number, choice in reports:
        await report(hook_service, account.account_id, number, choice, at)
    # The first report again, as a second edge sends it: nothing new.
    await report(hook_service, account.account_id, NUMBER, "reject", first + 60_000)

    async def both_delivered() -> bool:
        alerts = await listed(http, hook_service, account)
        return len(alerts) == 2 and all(a["delivered"]["webhook"] for a in alerts)

    await until(both_delivered)
    await settled(hook_service.settings)
    alerts = await listed(http, hook_service, account)
    # Newest first; each window's first report is its alert's.
    assert alerts == [
        expected(account.account_id, first + WINDOW_MS, NUMBER, "forward"),
        expected(account.account_id, first + 60_000, NUMBER, "reject"),
    ]
    for listed_alert in alerts:
        (got,) = receiver.for_alert(listed_alert["id"])
        assert got.path == f"/ok/{account.account_id}"
        assert orjson.loads(got.body) == envelope(listed_alert)
    assert len(receiver.received) == 2


async def test_a_gated_call_no_worker_answers_raises_the_alert_for_its_owner(
    hook_service: RunningService, receiver: Receiver, http: aiohttp.ClientSession
) -> None:
    account = await hooked(http, hook_service, receiver)
    async with Admin(hook_service.settings) as admin:
        await admin.gate_set(account.account_id, NUMBER, unavailable="reject")
        token = (await admin.token_rotate(account.account_id, "gate", NUMBER))["token"]
    url = f"{hook_service.base_url}/v1/gate/{token}"

    async def token_known() -> bool:
        async with http.post(f"{url}/status", data={"CallSid": "CAprobe"}) as r:
            return r.status == 200

    await until(token_known)
    form = {"CallSid": "CAunscreened1", "From": "+12125550123", "To": NUMBER, "CallStatus": "ringing"}
    workers = role_pids(hook_service, "worker")
    assert workers
    before = now_ms()
    for pid in workers:
        os.kill(pid, signal.SIGSTOP)
    try:
        # No worker answers within the answer deadline: the number's `unavailable` choice.
        async with http.post(url, data=form) as r:
            root = ET.fromstring(await r.read())
            assert (r.status, [(c.tag, c.attrib) for c in root]) == (200, [("Reject", {"reason": "rejected"})])
    finally:
        for pid in workers:
            os.kill(pid, signal.SIGCONT)
    after = now_ms()

    async def delivered() -> bool:
        alerts = await listed(http, hook_service, account)
        return len(alerts) == 1 and alerts[0]["delivered"]["webhook"]

    await until(delivered, timeout_s=30.0)
    (alert,) = await listed(http, hook_service, account)
    # Raised from the edge's report, made when the edge gave up on the score: its window is that moment's.
    created = parse_ms(alert["created_at"])
    assert created is not None and before <= created <= after
    assert alert == expected(account.account_id, created, NUMBER, "reject")
    (got,) = receiver.for_alert(alert["id"])
    assert orjson.loads(got.body) == envelope(alert)
