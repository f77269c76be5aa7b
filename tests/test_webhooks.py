"""Signed webhook delivery to a real HTTPS receiver on loopback (docs/api.md, Alert delivery)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import trustme
from prometheus_client.parser import text_string_to_metric_families

from callscreen.admin import Admin
from domain.times import format_ms
from infra.clock import now_ms
from infra.ports import free_port_block
from tests.receiver import Receiver, receiver_env
from tests.service import AccountKeys, RunningService, create_account, role_pids, running_service
from tests.topics import read_topic

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def hook_service(
    kafka: str, tmp_path_factory: pytest.TempPathFactory, webhook_ca: tuple[trustme.CA, Path]
) -> Iterator[RunningService]:
    env = {
        **receiver_env(webhook_ca[1]),
        # The worker exports on this port, the alerting role on the next.
        "CALLSCREEN_METRICS_PORT": str(free_port_block(2)),
    }
    with running_service(tmp_path_factory.mktemp("hooks") / "data", kafka, env=env) as running:
        yield running


def independent_check(secret: str, header: str, body: bytes) -> list[bool]:
    """Each v1 in the header, checked with nothing but hashlib and hmac."""
    parts = [p.split("=", 1) for p in header.split(",")]
    timestamp = next(v for k, v in parts if k == "t")
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    assert abs(int(timestamp) - time.time()) < 300
    return [hmac.compare_digest(expected, v) for k, v in parts if k == "v1"]


async def use_hook(http: aiohttp.ClientSession, service: RunningService, account: AccountKeys, url: str) -> None:
    body = {"alert_webhook_url": url}
    async with http.patch(f"{service.base_url}/v1/account", json=body, headers=account.headers) as r:
        assert r.status == 200, await r.text()


async def raise_rate_alert(
    http: aiohttp.ClientSession, service: RunningService, account: AccountKeys, caller: str
) -> None:
    # A minute back: inside the rate rule's window, and far from the long-call rule's 30 minutes. Backdated
    # an hour, the six calls also raised `call.long_running` each, and those took the account's four
    # webhook slots ahead of the rate alert whenever the sweep raised them first.
    base = now_ms() - 60_000
    for i in range(6):
        body = {
            "type": "call.started",
            "call_id": f"{caller}-{i}",
            "to": "+14155552671",
            "from": caller,
            "at": format_ms(base + i * 1000),
        }
        async with http.post(f"{service.base_url}/v1/events", json=body, headers=account.headers) as r:
            assert r.status == 200


async def listed(http: aiohttp.ClientSession, service: RunningService, account: AccountKeys) -> list[dict[str, Any]]:
    async with http.get(f"{service.base_url}/v1/alerts?type=caller.rate_exceeded", headers=account.headers) as r:
        return list((await r.json())["data"])


async def until(predicate: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not await predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.1)


async def test_delivery_is_signed_over_the_exact_bytes(
    hook_service: RunningService, module_receiver: Receiver, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    account = await create_account(hook_service.settings, http, hook_service.base_url)
    await use_hook(http, hook_service, account, f"{module_receiver.url}/ok/{account.account_id}")
    await raise_rate_alert(http, hook_service, account, "+447911300001")

    async def delivered() -> bool:
        alerts = await listed(http, hook_service, account)
        return bool(alerts) and alerts[0]["delivered"]["webhook"] is True

    await until(delivered, 10)
    (alert,) = await listed(http, hook_service, account)
    (got,) = module_receiver.for_alert(alert["id"])
    assert got.path == f"/ok/{account.account_id}"
    assert got.headers["Content-Type"] == "application/json"
    assert independent_check(account.signing_secret, got.headers["X-Service-Signature"], got.body) == [True]
    envelope = orjson.loads(got.body)
    assert set(envelope) == {"id", "type", "account_id", "created_at", "data"}
    assert envelope == {k: alert[k] for k in envelope}
    body_file = tmp_path / "body.json"
    body_file.write_bytes(got.body)
    header = got.headers["X-Service-Signature"]
    command = [
        sys.executable,
        "-m",
        "callscreen.cli",
        "verify-signature",
        "--secret",
        account.signing_secret,
        "--header",
        header,
        "--body-file",
        str(body_file),
    ]
    assert subprocess.run(command, capture_output=True).returncode == 0
    body_file.write_bytes(got.body.replace(b"rate_exceeded", b"rate_exceedeD"))
    assert subprocess.run(command, capture_output=True).returncode == 1


async def test_rotation_sends_both_signatures(
    hook_service: RunningService, module_receiver: Receiver, http: aiohttp.ClientSession
) -> None:
    account = await create_account(hook_service.settings, http, hook_service.base_url)
    await use_hook(http, hook_service, account, f"{module_receiver.url}/ok/{account.account_id}")
    async with Admin(hook_service.settings) as admin:
        new = (await admin.secret_rotate(account.account_id))["signing_secret"]
    await raise_rate_alert(http, hook_service, account, "+447911300002")

    async def arrived() -> bool:
        alerts = await listed(http, hook_service, account)
        return bool(alerts) and bool(module_receiver.for_alert(alerts[0]["id"]))

    await until(arrived, 10)
    (alert,) = await listed(http, hook_service, account)
    (got,) = module_receiver.for_alert(alert["id"])
    header = got.headers["X-Service-Signature"]
    assert header.count("v1=") == 2
    assert independent_check(new, header, got.body) == [True, False]
    assert independent_check(account.signing_secret, header, got.body) == [False, True]


async def test_a_hanging_receiver_delays_no_score_and_no_other_account(
    hook_service: RunningService, module_receiver: Receiver, http: aiohttp.ClientSession
) -> None:
    slow = await create_account(hook_service.settings, http, hook_service.base_url)
    fast = await create_account(hook_service.settings, http, hook_service.base_url)
    await use_hook(http, hook_service, slow, f"{module_receiver.url}/slow/{slow.account_id}")
    await use_hook(http, hook_service, fast, f"{module_receiver.url}/ok/{fast.account_id}")
    await raise_rate_alert(http, hook_service, slow, "+447911300003")

    async def slow_arrived() -> bool:
        return any(r.path.startswith(f"/slow/{slow.account_id}") for r in module_receiver.received)

    await until(slow_arrived, 10)
    hung_at = next(r.at for r in module_receiver.received if r.path.startswith(f"/slow/{slow.account_id}"))
    answered = []
    for i in range(5):
        body = {"type": "call.started", "call_id": f"during-{i}", "to": "+14155552671", "from": "+447911300099"}
        async with http.post(f"{hook_service.base_url}/v1/events", json=body, headers=slow.headers) as r:
            assert r.status == 200
        answered.append(time.monotonic())
    await raise_rate_alert(http, hook_service, fast, "+447911300004")

    async def fast_arrived() -> bool:
        return any(r.path.startswith(f"/ok/{fast.account_id}") for r in module_receiver.received)

    await until(fast_arrived, 10)
    fast_at = next(r.at for r in module_receiver.received if r.path.startswith(f"/ok/{fast.account_id}"))
    # The slow receiver holds its request for 10 s: everything above happened while it was still hanging.
    assert all(at < hung_at + 8 for at in answered)
    assert fast_at < hung_at + 8
    (alert,) = await listed(http, hook_service, slow)
    assert alert["delivered"] == {"webhook": False}
    # The rate alert is the account's only one, so no other delivery holds its slots.
    async with http.get(f"{hook_service.base_url}/v1/alerts", headers=slow.headers) as r:
        assert [a["id"] for a in (await r.json())["data"]] == [alert["id"]]

    async def timed_out() -> bool:
        alerts = await listed(http, hook_service, slow)
        return alerts[0]["delivery"] is not None

    await until(timed_out, 12)
    (alert,) = await listed(http, hook_service, slow)
    assert alert["delivered"] == {"webhook": False}
    assert alert["delivery"]["error"] == "timeout"
    assert 7_900 <= alert["delivery"]["duration_ms"] < 9_000


async def test_killing_the_alerting_role_mid_delivery_never_delivers_twice(
    hook_service: RunningService, module_receiver: Receiver, http: aiohttp.ClientSession
) -> None:
    account = await create_account(hook_service.settings, http, hook_service.base_url)
    await use_hook(http, hook_service, account, f"{module_receiver.url}/hold/{account.account_id}")
    module_receiver.release.clear()
    await raise_rate_alert(http, hook_service, account, "+447911300005")

    async def holding() -> bool:
        return any(r.path.startswith(f"/hold/{account.account_id}") for r in module_receiver.received)

    await until(holding, 10)
    # The account may raise more than one alert: follow the one whose POST is being held.
    held = next(r for r in module_receiver.received if r.path.startswith(f"/hold/{account.account_id}"))
    held_id = orjson.loads(held.body)["id"]
    pids = role_pids(hook_service, "alerting")
    assert len(pids) == 1
    os.kill(pids[0], signal.SIGKILL)
    killed_at = time.time()
    module_receiver.release.set()
    settings = hook_service.settings
    alerts_end = len(await read_topic(settings, settings.topic("alerts")))

    async def restarted_and_caught_up() -> bool:
        beats = [orjson.loads(r.value) for r in await read_topic(settings, settings.topic("status"))]
        fresh = [b for b in beats if b.get("kind") == "alerting.heartbeat" and b["sent_at"] > killed_at]
        return any(sum(b["positions"].values()) >= alerts_end for b in fresh)

    await until(restarted_and_caught_up, 30)
    async with http.get(f"{hook_service.base_url}/v1/alerts/{held_id}", headers=account.headers) as r:
        alert = await r.json()
    assert len(module_receiver.for_alert(held_id)) == 1
    assert alert["delivered"] == {"webhook": False}


async def test_patch_refuses_plain_http(hook_service: RunningService, http: aiohttp.ClientSession) -> None:
    account = await create_account(hook_service.settings, http, hook_service.base_url)
    async with http.patch(
        f"{hook_service.base_url}/v1/account", json={"alert_webhook_url": "http://127.0.0.1/x"}, headers=account.headers
    ) as r:
        assert (r.status, await r.json()) == (400, {"error": "invalid_webhook_url", "reason": "not_https"})


async def scrape(http: aiohttp.ClientSession, port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample a process exports, by name and labels."""
    async with http.get(f"http://127.0.0.1:{port}/metrics") as r:
        assert r.status == 200
        text = await r.text()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_worker_and_alerting_export_lag_folds_and_deliveries(
    hook_service: RunningService, module_receiver: Receiver, http: aiohttp.ClientSession
) -> None:
    worker_port = hook_service.settings.metrics_port
    alerting_port = worker_port + 1
    delivered = ("callscreen_deliveries_total", (("outcome", "delivered"),))
    before = (await scrape(http, alerting_port)).get(delivered, 0.0)
    account = await create_account(hook_service.settings, http, hook_service.base_url)
    await use_hook(http, hook_service, account, f"{module_receiver.url}/ok/{account.account_id}")
    await raise_rate_alert(http, hook_service, account, "+447911300006")

    async def all_delivered() -> bool:
        async with http.get(f"{hook_service.base_url}/v1/alerts", headers=account.headers) as r:
            alerts = (await r.json())["data"]
        return bool(alerts) and all(a["delivered"]["webhook"] for a in alerts)

    await until(all_delivered, 20)
    async with http.get(f"{hook_service.base_url}/v1/alerts", headers=account.headers) as r:
        # The sweep keeps raising call.long_running for these hour-old open calls: count what was delivered.
        shown = sum(1 for a in (await r.json())["data"] if a["delivered"]["webhook"])
    assert (await scrape(http, alerting_port))[delivered] >= before + shown

    async def caught_up() -> bool:
        samples = await scrape(http, worker_port)
        lags = {labels: v for (name, labels), v in samples.items() if name == "callscreen_consumer_lag"}
        events = [v for labels, v in lags.items() if ("topic", hook_service.settings.topic("events")) in labels]
        mirrored = [v for labels, v in lags.items() if ("consumer", "mirror") in labels]
        return len(events) == hook_service.settings.partitions and not any(events) and len(mirrored) > 0

    await until(caught_up, 10)
    worker = await scrape(http, worker_port)
    assert worker[("callscreen_fold_seconds_count", (("topic", "events"),))] >= 6
    assert worker[("callscreen_generation", ())] == 0
    # The worker's tables and feature view hold data, and the budget's cache accounts for it.
    assert 0 < worker[("callscreen_rocksdb_bytes", ())] <= 2 * hook_service.settings.rocksdb_memory_mb * 1024 * 1024
    alerting = await scrape(http, alerting_port)
    assert alerting[("callscreen_delivery_seconds_count", ())] >= 1
    alerts_lag = (("consumer", "alerting"), ("partition", "0"), ("topic", hook_service.settings.topic("alerts")))
    assert ("callscreen_consumer_lag", alerts_lag) in alerting
