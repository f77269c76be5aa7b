"""Crash safety: SIGKILL the worker while events stream in; every acknowledged event counts exactly once."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

import aiohttp
import pytest

from infra.clock import now_ms
from tests.service import RunningService, create_account, role_pids, settled, wait_for_status
from tests.traffic import on_usage_day, script

pytestmark = pytest.mark.slow

KILLS = 3


async def test_sigkilled_worker_loses_nothing_and_counts_nothing_twice(
    log_service: RunningService, http: aiohttp.ClientSession
) -> None:
    base_url, settings = log_service.base_url, log_service.settings
    account = await create_account(settings, http, base_url)
    bodies = script(7, now_ms() - 15 * 60_000, 60)
    acked: list[tuple[dict[str, Any], dict[str, Any]]] = []
    appended: list[dict[str, Any]] = []
    start_times: list[tuple[int, int]] = []
    streaming_done = asyncio.Event()

    async def stream() -> None:
        for body in bodies:
            sent = now_ms()
            async with http.post(f"{base_url}/v1/events", json=body, headers=account.headers) as r:
                answer = await r.json()
                if body["type"] == "call.started" and r.status in (200, 503):
                    start_times.append((sent, now_ms()))
                if r.status == 200:
                    acked.append((body, answer))
                # 503 unavailable comes only after the append: the event is in the log all the same.
                if r.status in (200, 503):
                    appended.append(body)
                else:
                    assert r.status in (404, 402), (r.status, answer)
        streaming_done.set()

    streamer = asyncio.create_task(stream())
    kills = 0
    while kills < KILLS and not streaming_done.is_set():
        await wait_for_status(http, "GET", f"{base_url}/healthz", 200, timeout_s=60)
        await asyncio.sleep(1.0)  # let some traffic through between kills
        pids = role_pids(log_service, "worker")
        assert len(pids) == 1
        os.kill(pids[0], signal.SIGKILL)
        kills += 1
    await streamer
    assert kills >= 2
    await wait_for_status(http, "GET", f"{base_url}/healthz", 200, timeout_s=60)
    await settled(settings, timeout_s=60)

    starts = {b["call_id"] for b in appended if b["type"] == "call.started"}
    async with http.get(f"{base_url}/v1/account", headers=account.headers) as r:
        usage = await r.json()
    calls: dict[str, Any] = {}
    for call_id in sorted(starts):
        async with http.get(f"{base_url}/v1/calls/{call_id}", headers=account.headers) as r:
            assert r.status == 200, call_id
            calls[call_id] = await r.json()
    for body, answer in acked:
        call = calls[body["call_id"]]
        if body["type"] == "call.started":
            assert (call["score"], call["action"], call["reasons"][: len(answer["reasons"])]) == (
                answer["score"],
                answer["action"],
                answer["reasons"],
            )
        elif body["type"] == "call.ended":
            assert call["state"] == "ended" and call["duration_s"] == answer["duration_s"]
    for call_id, call in calls.items():
        posted = [b for b in appended if b["call_id"] == call_id]
        assert call["user_turns"] == sum(1 for b in posted if b["type"] == "turn.started" and b["role"] == "user")
        assert call["agent_turns"] == sum(1 for b in posted if b["type"] == "turn.started" and b["role"] == "agent")
        assert call["interruptions"] == sum(1 for b in posted if b["type"] == "interruption")
    assert len(start_times) == len(starts)
    assert usage["scoring"]["used_today"] in on_usage_day(usage, start_times)
    async with http.get(f"{base_url}/v1/alerts?limit=200", headers=account.headers) as r:
        alerts = (await r.json())["data"]
    ids = [a["id"] for a in alerts]
    assert len(ids) == len(set(ids))
    # One alert per detection: the same type, number, caller and triggering call never twice.
    keys = [(a["type"], a["data"].get("number"), a["data"].get("caller"), a["data"].get("call_id")) for a in alerts]
    assert len(keys) == len(set(keys))
