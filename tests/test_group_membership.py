"""A worker and `callscreen run`'s alerting role are static members of their consumer groups
(infra/membership.py): restarted after SIGKILL each takes its partitions back under the same id, and a
clean stop leaves the group at once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from infra.clock import now_ms
from infra.kafka import make_admin
from infra.membership import group_instance
from infra.settings import Settings
from tests.service import create_account, role_pids, start_service
from tests.traffic import script

pytestmark = pytest.mark.slow


async def group(settings: Settings, name: str = "") -> tuple[str, list[str]]:
    """A consumer group (the workers' unless named) as the broker describes it now: its state and its
    members' ids."""
    admin = make_admin(settings)
    await admin.start()
    try:
        [response] = await admin.describe_consumer_groups([name or settings.app_id])
    finally:
        await admin.close()
    [(error_code, _, state, _, _, members, *_)] = response.groups
    assert error_code == 0
    return state, sorted(member[0] for member in members)


async def until_group(
    settings: Settings, wanted: Any, name: str = "", timeout_s: float = 60.0
) -> tuple[str, list[str]]:
    deadline = time.monotonic() + timeout_s
    while not wanted(found := await group(settings, name)):
        assert time.monotonic() < deadline, found
        await asyncio.sleep(0.2)
    return found


async def test_a_worker_rejoins_as_itself_after_a_crash_and_leaves_when_stopped(
    kafka: str, tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    service = start_service(tmp_path / "data", kafka)
    try:
        settings = service.settings
        account = await create_account(settings, http, service.base_url)
        starts = iter(b for b in script(9, now_ms() - 10 * 60_000, 60) if b["type"] == "call.started")

        async def answered() -> None:
            """Posts starts until one is answered 200: the worker holds the call's partition and folds."""
            deadline = time.monotonic() + 60
            while True:
                async with http.post(f"{service.base_url}/v1/events", json=next(starts), headers=account.headers) as r:
                    if r.status == 200:
                        return
                    assert r.status == 503, await r.text()
                assert time.monotonic() < deadline
                await asyncio.sleep(0.1)

        await answered()
        instance = group_instance(tmp_path / "data" / "worker-0" / "gen-0")
        # Kafka names a static member after its instance id; a dynamic one after its client id.
        state, [before] = await group(settings)
        assert state == "Stable" and before.startswith(f"{instance}-"), before

        [pid] = role_pids(service, "worker")
        os.kill(pid, signal.SIGKILL)
        await answered()
        _, [after] = await until_group(settings, lambda found: found[0] == "Stable")
        assert after.startswith(f"{instance}-") and after != before

        # A second worker of the group, from a directory of its own, then stopped cleanly.
        other_dir = tmp_path / "other"
        command = [sys.executable, "-m", "callscreen.cli", "run", "--role", "worker", "--data-dir", str(other_dir)]
        with open(tmp_path / "other.log", "w") as log:
            other = subprocess.Popen(command, stdout=log, stderr=log, env={**os.environ, **service.env})
        try:
            other_instance = group_instance(other_dir / "worker-0" / "gen-0")
            await until_group(
                settings,
                lambda found: found[0] == "Stable" and any(m.startswith(f"{other_instance}-") for m in found[1]),
            )
        finally:
            other.send_signal(signal.SIGTERM)
            assert other.wait(timeout=30) == 0
        # Its LeaveGroup went out as it stopped; without it the member stays until its session times out (10 s).
        _, members = await group(settings)
        assert not any(m.startswith(f"{other_instance}-") for m in members), members
        await answered()

        # The alerting role `run` started: named after the data directory, and again after a SIGKILL.
        alerting = settings.topic("alerting")
        alerting_instance = group_instance(tmp_path / "data" / "alerting")
        _, [before] = await until_group(settings, lambda found: found[0] == "Stable", alerting)
        assert before.startswith(f"{alerting_instance}-"), before
        [alerting_pid] = role_pids(service, "alerting")
        os.kill(alerting_pid, signal.SIGKILL)
        _, [after] = await until_group(settings, lambda found: found[0] == "Stable" and found[1] != [before], alerting)
        assert after.startswith(f"{alerting_instance}-"), after
    finally:
        service.stop()
