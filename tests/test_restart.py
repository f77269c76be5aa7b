"""The log is on disk: stop and start again, cleanly or after SIGKILL of everything, and nothing changed."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import trustme

from tests.receiver import Receiver, receiver_env
from tests.rocks_options import assert_opened_within_budget, worker_databases
from tests.service import RunningService, create_account, settled, start_service, wait_for_status
from tests.topics import read_topic, topic_names
from tests.traffic import NO_SWEEP, assert_same_answers, past_every_window, post_all, script, snapshot

pytestmark = pytest.mark.slow

READY_AFTER_CRASH_S = 60.0


def service_pids(service: RunningService) -> list[int]:
    """`callscreen run`, the roles it started and its Kafka broker."""
    children = subprocess.run(["pgrep", "-P", str(service.process.pid)], capture_output=True, text=True)
    found = {service.process.pid, *map(int, children.stdout.split()), *broker_pids(service.data_dir)}
    return sorted(found)


def broker_pids(data_dir: Path) -> list[int]:
    pattern = f"{data_dir.resolve()}/kafka/server.properties"
    return [int(pid) for pid in subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()]


def gone(pids: list[int]) -> bool:
    return not any(Path(f"/proc/{pid}").exists() and "zombie" not in status(pid) for pid in pids)


def status(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return "zombie"


async def wait_until(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.1)


async def everything(service: RunningService, http: aiohttp.ClientSession, accounts: list[Any]) -> list[Any]:
    callers = ["+447911210000", "+447911220000", "+16465550100"]
    return [await snapshot(http, service.base_url, account, callers) for account in accounts]


async def logged(service: RunningService) -> tuple[int, int]:
    """How many alerts and delivery records the log holds."""
    settings = service.settings
    return len(await read_topic(settings, settings.topic("alerts"))), len(
        await read_topic(settings, settings.topic("deliveries"))
    )


@pytest.mark.timeout(420)  # a hang guard: three starts of a service and its broker
async def test_stop_and_crash_keep_every_answer_key_alert_and_delivery(
    tmp_path: Path, http: aiohttp.ClientSession, receiver: Receiver, webhook_ca: tuple[trustme.CA, Path]
) -> None:
    data_dir = tmp_path / "data"
    env = {
        **receiver_env(webhook_ca[1]),
        # 90 calls with their turns, posted as fast as they answer.
        "CALLSCREEN_EVENTS_PER_MINUTE": "100000",
        **NO_SWEEP,
    }
    first = start_service(data_dir, env=env)
    try:
        accounts = [await create_account(first.settings, http, first.base_url) for _ in range(3)]
        for account in accounts:
            hook = {"alert_webhook_url": f"{receiver.url}/ok/{account.account_id}"}
            async with http.patch(f"{first.base_url}/v1/account", json=hook, headers=account.headers) as r:
                assert r.status == 200
        base = past_every_window(30)
        # The accounts side by side, each its events in order: what is compared is before and after.
        posted = await asyncio.gather(
            *(
                post_all(http, first.base_url, account, script(seed, base, 30))
                for seed, account in zip((21, 22, 23), accounts, strict=True)
            )
        )
        assert {status for answers in posted for status, _ in answers} == {200}
        await settled(first.settings)
        before = await everything(first, http, accounts)
        alerts, deliveries = await logged(first)
        assert alerts > 0 and len(receiver.received) == alerts
    finally:
        assert first.stop() == 0
    assert gone(broker_pids(data_dir)), "a clean stop stops the broker last"
    assert "did not stop in time" not in (tmp_path / "data.log").read_text(), "a clean stop stops every role"

    second = start_service(data_dir, env=env)
    doomed = service_pids(second)
    try:
        assert len(doomed) == 5, doomed  # run (the edge), one worker, the alerting and shadow roles, the broker
        await settled(second.settings)
        now = await everything(second, http, accounts)
        assert_same_answers(now, before)
        for db_dir in worker_databases(data_dir):
            assert_opened_within_budget(db_dir)
        assert await logged(second) == (alerts, deliveries)
        assert len(receiver.received) == alerts
    finally:
        for pid in doomed:
            os.kill(pid, signal.SIGKILL)
    await wait_until(lambda: gone(doomed), 10, "SIGKILL takes a moment")

    log_before_third = len((tmp_path / "data.log").read_text())
    started = time.monotonic()
    third = start_service(data_dir, env=env)
    try:
        ready_after = time.monotonic() - started
        assert ready_after <= READY_AFTER_CRASH_S
        # Ready means reads and writes answer, at once.
        now = await everything(third, http, accounts)
        assert_same_answers(now, before)
        # To a number of its own: on the traffic's numbers a call now would end their spikes (an alert).
        start = {"type": "call.started", "call_id": "after-crash", "to": "+14155552673", "from": "+12125550123"}
        async with http.post(f"{third.base_url}/v1/events", json=start, headers=accounts[0].headers) as r:
            assert r.status == 200 and "duplicate" not in await r.json()
        await settled(third.settings)
        assert await logged(third) == (alerts, deliveries)
        # The records the killed run had not committed are folded again after the recovery, each once: none
        # is dropped with the buffers and fetched again (processors/faust/feed.py, `Feed.clear`).
        refetched = [
            line
            for line in (tmp_path / "data.log").read_text()[log_before_third:].splitlines()
            if "fetching them again" in line
        ]
        assert refetched == []
        for db_dir in worker_databases(data_dir):
            assert_opened_within_budget(db_dir)
        assert len(receiver.received) == alerts
    finally:
        assert third.stop() == 0


async def test_a_dead_broker_comes_back_on_its_ports_and_a_sigkilled_run_leaves_nothing_behind(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    service = start_service(tmp_path / "data")
    account = await create_account(service.settings, http, service.base_url)
    url = f"{service.base_url}/v1/events"
    first = {"type": "call.started", "call_id": "first", "to": "+14155552671", "from": "+12125550123"}
    await wait_for_status(http, "POST", url, 200, timeout_s=60, json=first, headers=account.headers)
    # A first start on a new broker logs no error: each role with a consumer group waits until the broker
    # has loaded the group's coordinator before its consumer looks it up (infra/kafka.py, `until_coordinator`).
    logged = [orjson.loads(line) for line in (tmp_path / "data.log").read_text().splitlines()]
    assert [e for e in logged if e["level"] in ("error", "critical")] == []
    # Nor does the worker make a topic as it starts, which its group could ask for before the broker lists
    # it (logged at error level too): Faust's leader election topic is off (processors/app.py).
    assert [t for t in await topic_names(service.settings) if t.endswith("-__assignor-__leader")] == []
    ports_file = service.data_dir / "kafka" / "ports.json"
    ports = ports_file.read_text()
    [dead] = broker_pids(service.data_dir)
    os.kill(dead, signal.SIGKILL)
    # `run` starts it again on the same ports, which its roles and edge know, and the service answers.
    await wait_until(lambda: broker_pids(service.data_dir) not in ([], [dead]), 30, "the broker was not restarted")
    start = {"type": "call.started", "call_id": "after-broker", "to": "+14155552671", "from": "+12125550123"}
    await wait_for_status(http, "POST", url, 200, timeout_s=60, json=start, headers=account.headers)
    assert ports_file.read_text() == ports
    pids = service_pids(service)
    assert len(pids) == 5  # run, a worker, the alerting and shadow roles, the broker
    os.kill(service.process.pid, signal.SIGKILL)
    service.process.wait()
    # When `run` dies the roles are killed with it and the broker gets SIGTERM and stops cleanly.
    await wait_until(lambda: gone(pids), 40, f"orphans left: {pids}")
