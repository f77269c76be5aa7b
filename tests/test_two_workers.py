"""Two workers share the partitions of one consumer group and answer the same as one."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from tests.service import create_account, settled, start_service
from tests.topics import read_topic
from tests.traffic import NO_SWEEP, past_every_window, post_all, script, snapshot

pytestmark = pytest.mark.slow

ACCOUNTS = ("acct_TwoWorkers000001", "acct_TwoWorkers000002")


async def wait_for_split(settings: Any, workers: int, timeout_s: float = 60.0) -> None:
    """Until `workers` distinct workers each hold a ready share of the events partitions, disjoint and complete."""
    deadline = time.monotonic() + timeout_s
    while True:
        latest: dict[str, dict[str, Any]] = {}
        for record in await read_topic(settings, settings.topic("status")):
            beat = orjson.loads(record.value)
            if beat.get("kind") == "worker.heartbeat":
                latest[beat["worker"]] = beat
        shares = [set(b["partitions"]) for b in latest.values() if b["ready"] and b["partitions"]]
        union = set().union(*shares) if shares else set()
        if len(shares) == workers and union == set(range(settings.partitions)) and sum(map(len, shares)) == len(union):
            return
        assert time.monotonic() < deadline, f"workers never split the partitions: {latest}"
        await asyncio.sleep(0.5)


async def run_traffic(data_dir: Path, kafka: str, workers: int, http: aiohttp.ClientSession, base: int) -> Any:
    """The same accounts and the same events through a fresh service; every read endpoint's answers."""
    # No sweep: its ticks land wherever the wall clock puts them among the turns, differently in each run.
    env = {"CALLSCREEN_WORKERS": str(workers), **NO_SWEEP}
    service = start_service(data_dir, kafka, env=env)
    try:
        await wait_for_split(service.settings, workers)
        accounts = [await create_account(service.settings, http, service.base_url, account_id=a) for a in ACCOUNTS]
        answers = []
        plans = [script(11, base, 25), script(12, base, 25)]
        for account, bodies in zip(accounts, plans, strict=True):
            answers += await post_all(http, service.base_url, account, bodies)
        callers = sorted({b["from"] for b in plans[0] if b["type"] == "call.started"})[:10]
        await settled(service.settings)
        views = [await snapshot(http, service.base_url, account, callers) for account in accounts]
        for view in views:
            # When the account was created is the admin command's wall clock, and an alert is created when the
            # edge received the event that raised it: neither is the traffic's.
            del view["/v1/account"]["created_at"]
            for path, answer in view.items():
                for alert in answer.get("data", []) if path.startswith("/v1/alerts?") else [answer]:
                    if path.startswith("/v1/alerts"):
                        del alert["created_at"]
        return answers, views
    finally:
        assert service.stop() == 0


@pytest.mark.timeout(300)  # a hang guard: the test drives thousands of events through fresh services
async def test_two_workers_answer_the_same_as_one(kafka: str, tmp_path: Path, http: aiohttp.ClientSession) -> None:
    base = past_every_window(25)
    one_answers, one_views = await run_traffic(tmp_path / "one", kafka, 1, http, base)
    two_answers, two_views = await run_traffic(tmp_path / "two", kafka, 2, http, base)

    assert len(one_answers) > 400
    assert one_views[0]["/v1/alerts?limit=200"]["data"], "the traffic should have raised alerts"
    differ = [(i, a, b) for i, (a, b) in enumerate(zip(one_answers, two_answers, strict=True)) if a != b]
    assert not differ, f"{len(differ)} answers differ, first: {differ[:3]}"
    for one_view, two_view in zip(one_views, two_views, strict=True):
        paths = [path for path in one_view if orjson.dumps(one_view[path]) != orjson.dumps(two_view.get(path))]
        assert not paths, [(path, one_view[path], two_view.get(path)) for path in paths[:2]]
