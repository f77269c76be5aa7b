"""Two alerting instances share the alerts partitions in one consumer group and deliver each alert once."""

from __future__ import annotations

import asyncio
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

from infra.kafka import partition_for
from infra.settings import Settings
from tests.receiver import Receiver, receiver_env
from tests.service import AccountKeys, RunningService, create_account, running_service
from tests.test_webhooks import raise_rate_alert, until, use_hook
from tests.topics import read_topic


@pytest.fixture(scope="module")
def group_service(
    kafka: str, tmp_path_factory: pytest.TempPathFactory, webhook_ca: tuple[trustme.CA, Path]
) -> Iterator[RunningService]:
    env = receiver_env(webhook_ca[1])
    with running_service(tmp_path_factory.mktemp("group") / "data", kafka, env=env) as running:
        yield running


def second_alerting(service: RunningService, ca_file: Path) -> subprocess.Popen[bytes]:
    """Another `callscreen run --role alerting` on the same broker, topics and consumer group."""
    env = {**os.environ, **service.env, **receiver_env(ca_file)}
    command = [sys.executable, "-m", "callscreen.cli", "run", "--role", "alerting", "--data-dir", str(service.data_dir)]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def shares(settings: Settings) -> dict[str, set[str]]:
    """The alerts partitions each live alerting instance holds, from its latest heartbeat."""
    latest: dict[str, dict[str, Any]] = {}
    for record in await read_topic(settings, settings.topic("status")):
        beat = orjson.loads(record.value)
        if beat.get("kind") == "alerting.heartbeat":
            latest[beat["instance"]] = beat
    return {
        instance: set(beat["positions"]) for instance, beat in latest.items() if time.time() - beat["sent_at"] < 2.5
    }


async def split_between(settings: Settings, instances: int) -> dict[str, set[str]]:
    """Waits until exactly `instances` live instances hold all the partitions between them, each some."""
    everything = {str(p) for p in range(settings.partitions)}
    found: dict[str, set[str]] = {}

    async def split() -> bool:
        nonlocal found
        found = await shares(settings)
        held = [p for parts in found.values() for p in parts]
        return len(found) == instances and all(found.values()) and sorted(held) == sorted(everything)

    await until(split, 60)
    return found


def one_per_partition(settings: Settings) -> list[str]:
    """Account ids whose alerts land on every partition of the alerts topic, one each."""
    chosen: dict[int, str] = {}
    n = 0
    while len(chosen) < settings.partitions:
        candidate = f"acct_Group{n:011d}"
        chosen.setdefault(partition_for(candidate, settings.partitions), candidate)
        n += 1
    return [chosen[p] for p in sorted(chosen)]


async def raise_and_deliver(
    http: aiohttp.ClientSession, service: RunningService, accounts: list[AccountKeys], round_: int
) -> None:
    """One rate alert per account, then waits until every alert of these accounts is delivered."""
    for n, account in enumerate(accounts):
        await raise_rate_alert(http, service, account, f"+4479113{round_}{n:03d}")

    async def all_delivered() -> bool:
        for account in accounts:
            async with http.get(
                f"{service.base_url}/v1/alerts?type=caller.rate_exceeded", headers=account.headers
            ) as r:
                alerts = (await r.json())["data"]
            if len(alerts) < round_ or not all(a["delivered"]["webhook"] for a in alerts):
                return False
        return True

    await until(all_delivered, 30)


async def test_two_alerting_instances_deliver_each_alert_exactly_once(
    group_service: RunningService,
    module_receiver: Receiver,
    http: aiohttp.ClientSession,
    webhook_ca: tuple[trustme.CA, Path],
) -> None:
    settings = group_service.settings
    await split_between(settings, 1)
    other = second_alerting(group_service, webhook_ca[1])
    try:
        found = await split_between(settings, 2)
        accounts = [
            await create_account(settings, http, group_service.base_url, account_id=account_id)
            for account_id in one_per_partition(settings)
        ]
        # Each instance holds the partition of at least one of these accounts.
        for parts in found.values():
            assert any(str(partition_for(a.account_id, settings.partitions)) in parts for a in accounts)
        for account in accounts:
            await use_hook(http, group_service, account, f"{module_receiver.url}/ok/{account.account_id}")
        await raise_and_deliver(http, group_service, accounts, 1)
        # One instance leaves: the other takes its partitions over from the committed offsets.
        other.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(other.wait, 30) == 0
        await split_between(settings, 1)
        await raise_and_deliver(http, group_service, accounts, 2)
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()
    # Every alert these accounts raised reached the receiver at most once, and each one waited for
    # (the rate alerts) exactly once; the hour-old calls keep raising call.long_running meanwhile.
    ids = {a.account_id for a in accounts}
    raised = [orjson.loads(r.value) for r in await read_topic(settings, settings.topic("alerts"))]
    mine = {alert["id"]: alert["type"] for alert in raised if alert["account_id"] in ids}
    counts = {alert_id: len(module_receiver.for_alert(alert_id)) for alert_id in mine}
    rate = [alert_id for alert_id, kind in mine.items() if kind == "caller.rate_exceeded"]
    assert len(rate) == 2 * len(accounts)
    assert {counts[alert_id] for alert_id in rate} == {1}
    assert max(counts.values()) == 1
