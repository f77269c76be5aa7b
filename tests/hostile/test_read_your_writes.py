"""Read your writes: an acknowledged start is visible to every later event of its call, at once.

Eight clients each post calls back to back: a start, and the moment it is answered a turn, an
interruption and an end. None may get 404 `unknown_call`. `make test` runs 250 calls once; `make soak`
runs 2,000 calls three times (CALLSCREEN_TEST_RYW_CALLS, CALLSCREEN_TEST_RYW_RUNS).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import aiohttp
import pytest

from tests.service import AccountKeys, RunningService, create_account, running_service

CALLS = int(os.environ.get("CALLSCREEN_TEST_RYW_CALLS", "250"))
RUNS = int(os.environ.get("CALLSCREEN_TEST_RYW_RUNS", "1"))
CLIENTS = 8


@pytest.fixture(scope="module")
def busy_service(kafka: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    env = {"CALLSCREEN_EVENTS_PER_MINUTE": "1000000"}
    with running_service(tmp_path_factory.mktemp("ryw") / "data", kafka, env=env) as running:
        yield running


def call_events(call_id: str, caller: str) -> list[dict[str, Any]]:
    return [
        {"type": "call.started", "call_id": call_id, "to": "+14155552671", "from": caller},
        {"type": "turn.started", "call_id": call_id, "role": "user"},
        {"type": "interruption", "call_id": call_id},
        {"type": "call.ended", "call_id": call_id, "reason": "completed"},
    ]


async def client(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, run: int, index: int
) -> Counter[tuple[str, int]]:
    seen: Counter[tuple[str, int]] = Counter()
    for n in range(index, CALLS, CLIENTS):
        for body in call_events(f"ryw-{run}-{n}", f"+1646{run}{n:06d}"):
            async with http.post(f"{base_url}/v1/events", json=body, headers=account.headers) as r:
                seen[(body["type"], r.status)] += 1
                assert r.status == 200, (body, r.status, await r.text())
    return seen


@pytest.mark.timeout(60 + RUNS * CALLS // 4)  # a hang guard: thousands of events through one service
@pytest.mark.parametrize("run", range(RUNS))
async def test_every_event_after_an_answered_start_finds_its_call(
    busy_service: RunningService, http: aiohttp.ClientSession, run: int, record_property: Callable[[str, object], None]
) -> None:
    accounts = [await create_account(busy_service.settings, http, busy_service.base_url) for _ in range(CLIENTS)]
    started = time.monotonic()
    counts = await asyncio.gather(*(client(http, busy_service.base_url, accounts[i], run, i) for i in range(CLIENTS)))
    elapsed = time.monotonic() - started
    total = sum(counts, Counter())
    # Reported with -s (and as properties in --junitxml). A client fails at its first answer other than 200,
    # so a run that reaches this line reports 0 answered 404.
    events, not_found = sum(total.values()), sum(n for (_, status), n in total.items() if status == 404)
    for name, value in (("calls", CALLS), ("events", events), ("status_404", not_found), ("elapsed_s", elapsed)):
        record_property(name, round(value, 1))
    print(f"\nrun {run}: {CALLS} calls, {events} events, {not_found} answered 404, {elapsed:.1f} s")
    kinds = ("call.started", "turn.started", "interruption", "call.ended")
    assert total == Counter({(kind, 200): CALLS for kind in kinds})
