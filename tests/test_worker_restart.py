"""A worker started again on the session's Kafka: its tables come back from the changelogs, its sweep's due
times from its rows; and a rebuild with no worker says so."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from domain.times import format_ms
from infra.clock import now_ms
from infra.kafka import ensure_topics
from infra.settings import Settings
from tests.service import create_account, isolated, settled, start_service
from tests.topics import read_topic
from tests.traffic import post_all, script

pytestmark = pytest.mark.slow


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

    async def flags(base_url: str, headers: dict[str, str], call_id: str) -> list[str]:
        async with http.get(f"{base_url}/v1/calls/{call_id}", headers=headers) as r:
            assert r.status == 200
            found: list[str] = (await r.json())["flags"]
            return found

    data_dir = tmp_path / "data"
    first = start_service(data_dir, kafka)
    try:
        account = await create_account(first.settings, http, first.base_url)
        # Timed from here, once the first service is up: only its stop and the restart spend the margin.
        # Each call's start and its agent's turn. "ontime": the agent speaks now, the silence is due 20 s
        # from now. "late": reported 95 s behind its own clock, its silence due 40 s ago by that clock, 55 s
        # from now by the edge's.
        now = now_ms()
        calls = {"ontime": (now - 40_000, now), "late": (now - 100_000, now - 95_000)}
        late_tick = now + 55_000
        for call_id, (started, spoke) in calls.items():
            start = {"type": "call.started", "call_id": call_id, "to": "+14155552671", "from": "+447911555000"}
            agent = {"type": "turn.started", "call_id": call_id, "role": "agent", "at": format_ms(spoke)}
            answers = await post_all(http, first.base_url, account, [{**start, "at": format_ms(started)}, agent])
            assert [status for status, _ in answers] == [200, 200]
            assert answers[1][1]["flags"] == []
        await settled(first.settings)
    finally:
        assert first.stop() == 0
    # A cleanly stopped worker's last word is `worker.stopped`: a beat after it would make the next edge take
    # the stopped worker for a ready one and send it questions.
    last: dict[str, str] = {}
    for record in await read_topic(first.settings, first.settings.topic("status")):
        beat = orjson.loads(record.value)
        if beat.get("kind") in ("worker.heartbeat", "worker.stopped"):
            last[beat["worker"]] = beat["kind"]
    assert last and set(last.values()) == {"worker.stopped"}, last
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
