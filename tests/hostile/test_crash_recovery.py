"""A SIGKILLed worker keeps its tables: the next start recovers from the changelogs only what came after
its last checkpoint, not every row (issue 70, "crash = screening off, for longer as the service grows").

Before, a fold wrote RocksDB at once and the changelog behind, so every unclean start dropped the tables
and restored them whole from their changelogs: the time to ready grew with every call kept (34.5 s after
40,000 calls). The figures at 20,000 and 100,000 calls are `make bench-crash`'s (docs/hostile-runs.md).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import aiohttp
import pytest

from domain.times import format_ms
from infra.clock import now_ms
from tests.service import RunningService, create_account, role_pids, settled

pytestmark = pytest.mark.slow

CALLS = 40
TO = "+14155552671"


async def worker_metric(http: aiohttp.ClientSession, service: RunningService, name: str) -> float:
    async with http.get(f"http://127.0.0.1:{service.settings.metrics_port}/metrics") as r:
        text = await r.text()
    found = [line for line in text.splitlines() if line.startswith(name + " ")]
    assert found, f"{name} not served"
    return float(found[0].split()[-1])


async def until_metric_reaches(
    http: aiohttp.ClientSession, service: RunningService, name: str, value: float, timeout_s: float
) -> None:
    deadline = time.monotonic() + timeout_s
    while await worker_metric(http, service, name) < value:
        assert time.monotonic() < deadline, f"{name} stayed below {value}"
        await asyncio.sleep(0.2)


async def test_a_killed_worker_recovers_only_what_came_after_its_last_checkpoint(
    log_service: RunningService, http: aiohttp.ClientSession
) -> None:
    settings = log_service.settings
    account = await create_account(settings, http, log_service.base_url)
    base = now_ms() - 10 * 60_000
    for i in range(CALLS):
        call_id = f"ckpt-{i}"
        caller = f"+1646780{i:04d}"
        start = {"type": "call.started", "call_id": call_id, "to": TO, "from": caller, "at": format_ms(base + i)}
        end = {"type": "call.ended", "call_id": call_id, "duration_s": 30, "at": format_ms(base + i + 30_000)}
        for body in (start, end):
            async with http.post(f"{log_service.base_url}/v1/events", json=body, headers=account.headers) as r:
                assert r.status == 200, await r.text()
    await settled(settings, timeout_s=60)

    # Two checkpoints more with no changelog record sent meanwhile: one began after every row was written.
    sent = await worker_metric(http, log_service, "callscreen_changelog_records_total")
    checkpoints = await worker_metric(http, log_service, "callscreen_table_checkpoints_total")
    timeout_s = 10 * settings.table_checkpoint_s
    await until_metric_reaches(http, log_service, "callscreen_table_checkpoints_total", checkpoints + 2, timeout_s)
    assert await worker_metric(http, log_service, "callscreen_changelog_records_total") == sent

    [pid] = role_pids(log_service, "worker")
    os.kill(pid, signal.SIGKILL)
    # A start scored again: the new worker recovered its partitions and folds.
    after = {"type": "call.started", "call_id": "ckpt-after", "to": TO, "from": "+16467809999"}
    deadline = time.monotonic() + 60
    while True:
        async with http.post(f"{log_service.base_url}/v1/events", json=after, headers=account.headers) as r:
            if r.status == 200:
                break
            assert r.status == 503 and time.monotonic() < deadline, (r.status, await r.text())
    [restarted] = role_pids(log_service, "worker")
    assert restarted != pid
    # The old code dropped the tables and recovered every row of them here.
    assert await worker_metric(http, log_service, "callscreen_recovered_rows_total") == 0

    async with http.get(
        f"{log_service.base_url}/v1/calls", params={"number": TO, "limit": "200"}, headers=account.headers
    ) as r:
        assert r.status == 200
        listed = await r.json()
    states = {c["call_id"]: c["state"] for c in listed["data"]}
    assert states == {**{f"ckpt-{i}": "ended" for i in range(CALLS)}, "ckpt-after": "open"}
