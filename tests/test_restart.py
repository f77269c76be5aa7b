"""The log is on disk: stop and start again, cleanly or after SIGKILL of everything, and nothing changed."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import trustme

from domain.times import format_ms
from infra.clock import now_ms
from infra.kafka import ensure_topics
from infra.settings import Settings
from tests.receiver import Receiver, receiver_env
from tests.rocks_options import assert_opened_within_budget, worker_databases
from tests.service import RunningService, create_account, isolated, settled, start_service
from tests.topics import read_topic
from tests.traffic import NO_SWEEP, assert_same_answers, past_every_window, post_all, script, snapshot

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
        # A few hundred calls with their turns, posted as fast as they answer.
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
        base = past_every_window(100)
        for seed, account in zip((21, 22, 23), accounts, strict=True):
            answers = await post_all(http, first.base_url, account, script(seed, base, 100))
            assert {status for status, _ in answers} == {200}
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
        assert len(doomed) == 4, doomed  # run (the edge), one worker, the alerting role, the broker
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
        for db_dir in worker_databases(data_dir):
            assert_opened_within_budget(db_dir)
        assert len(receiver.received) == alerts
    finally:
        assert third.stop() == 0


async def test_a_sigkilled_run_leaves_no_broker_or_role_behind(tmp_path: Path) -> None:
    service = start_service(tmp_path / "data")
    pids = service_pids(service)
    assert len(pids) == 4
    os.kill(service.process.pid, signal.SIGKILL)
    service.process.wait()
    # When `run` dies the roles are killed with it and the broker gets SIGTERM and stops cleanly.
    await wait_until(lambda: gone(pids), 40, f"orphans left: {pids}")


async def test_rebuild_says_what_it_needs_when_no_service_runs(kafka: str, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "callscreen.cli", "rebuild", "--data-dir", str(tmp_path / "nothing")]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert done.returncode != 0
    assert "start `callscreen run`" in done.stderr
    # A broker with topics but no worker on them: the rebuild could never finish, so it says so.
    locator = isolated()
    await ensure_topics(Settings(broker=kafka, topic_prefix=locator["CALLSCREEN_TOPIC_PREFIX"]))
    env = {**os.environ, **locator, "CALLSCREEN_BROKER": kafka}
    done = subprocess.run(command, capture_output=True, text=True, timeout=30, env=env)
    assert done.returncode != 0
    assert "no worker is running" in done.stderr
    assert time.monotonic() - started < 30


async def test_a_worker_without_its_tables_recovers_them_from_the_log(
    kafka: str, tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    """Table writes reach their changelogs in coalesced flushes, and an event's offset is committed only
    after the flush that covers it; a worker that lost its local tables rebuilds them from the changelogs
    and the uncommitted events, and answers exactly as before."""
    data_dir = tmp_path / "data"
    bodies = script(5, now_ms() - 10 * 60_000, 12)
    first = start_service(data_dir, kafka)
    try:
        account = await create_account(first.settings, http, first.base_url)
        for body in bodies:
            async with http.post(f"{first.base_url}/v1/events", json=body, headers=account.headers) as r:
                assert r.status == 200, (body, await r.text())
        await settled(first.settings)
        before = await records(http, first.base_url, account.headers, bodies)
    finally:
        assert first.stop() == 0
    lost = list((data_dir / "worker-0").glob("gen-*/faust"))
    assert len(lost) == 1
    shutil.rmtree(lost[0])
    second = start_service(data_dir, kafka, env=first.env)
    try:
        await settled(second.settings)
        assert await records(http, second.base_url, account.headers, bodies) == before
    finally:
        assert second.stop() == 0


async def records(
    http: aiohttp.ClientSession, base_url: str, headers: dict[str, str], bodies: list[dict[str, Any]]
) -> list[object]:
    """Every call of `bodies`, the call list and the alert list, as the API answers them."""
    paths = [f"/v1/calls/{call_id}" for call_id in sorted({b["call_id"] for b in bodies})]
    answers = []
    for path in [*paths, "/v1/calls?limit=100", "/v1/alerts?limit=100"]:
        async with http.get(f"{base_url}{path}", headers=headers) as r:
            assert r.status == 200, path
            answers.append(await r.json())
    return answers


async def test_a_restarted_worker_ticks_each_call_at_its_own_time(
    kafka: str, tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    """A worker rebuilds its sweep's due times at start, each from the sweeps table and its call's row
    (`domain.calls.tick_after`): a call its platform reports on time is ticked once its silence is due; one
    reported late, only once as much time again has passed by the edge's clock."""
    now = now_ms()
    # Each call's start and its agent's turn. "ontime": the agent speaks now, the silence is due 20 s from
    # now. "late": reported 95 s behind its own clock, its silence due 40 s ago by that clock, 55 s from now
    # by the edge's.
    calls = {"ontime": (now - 40_000, now), "late": (now - 100_000, now - 95_000)}
    late_tick = now + 55_000

    async def flags(base_url: str, headers: dict[str, str], call_id: str) -> list[str]:
        async with http.get(f"{base_url}/v1/calls/{call_id}", headers=headers) as r:
            assert r.status == 200
            found: list[str] = (await r.json())["flags"]
            return found

    data_dir = tmp_path / "data"
    first = start_service(data_dir, kafka)
    try:
        account = await create_account(first.settings, http, first.base_url)
        for call_id, (started, spoke) in calls.items():
            start = {"type": "call.started", "call_id": call_id, "to": "+14155552671", "from": "+447911555000"}
            agent = {"type": "turn.started", "call_id": call_id, "role": "agent", "at": format_ms(spoke)}
            answers = await post_all(http, first.base_url, account, [{**start, "at": format_ms(started)}, agent])
            assert [status for status, _ in answers] == [200, 200]
            assert answers[1][1]["flags"] == []
        await settled(first.settings)
    finally:
        assert first.stop() == 0
    second = start_service(data_dir, kafka, env=first.env)
    try:
        deadline = time.monotonic() + 45
        while await flags(second.base_url, account.headers, "ontime") != ["silent_listener"]:
            assert time.monotonic() < deadline, "the on-time call was never ticked"
            await asyncio.sleep(0.2)
        assert await flags(second.base_url, account.headers, "late") == []
        # Else the check above came after the late call's own time and showed nothing.
        assert now_ms() < late_tick - 5_000, "the restart took too long to tell the calls apart"
    finally:
        assert second.stop() == 0
