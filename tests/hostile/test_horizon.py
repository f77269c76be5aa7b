"""Growth: calls past the hot-table horizon leave the worker's tables; the log keeps them.

On the old code every call stayed in the call table for good (the listing only cut its list of days),
so the tables grew with the whole history.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from domain import keys
from domain.rules import DAY_MS
from domain.times import format_ms
from infra.clock import now_ms
from infra.kafka import partition_for
from tests.service import (
    AccountKeys,
    RunningService,
    create_account,
    rebuild,
    running_service,
    settled,
    wait_for_status,
)

HOT_DAYS = 30
TO = "+14155552671"


@pytest.fixture(scope="module")
def short_horizon(kafka: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    with running_service(
        tmp_path_factory.mktemp("horizon") / "data", kafka, env={"CALLSCREEN_HOT_DAYS": str(HOT_DAYS)}
    ) as running:
        yield running


def ids_by_partition(account: str, partitions: int) -> dict[int, list[str]]:
    """Call ids grouped by the partition their events go to (a horizon moves per partition)."""
    found: dict[int, list[str]] = {}
    for n in range(200):
        call_id = f"h-{n}"
        found.setdefault(partition_for(keys.call(account, call_id), partitions), []).append(call_id)
    return found


async def answer(http: aiohttp.ClientSession, service: RunningService, account: AccountKeys, path: str) -> Any:
    async with http.get(f"{service.base_url}{path}", headers=account.headers) as r:
        return r.status, await r.json()


async def post(http: aiohttp.ClientSession, service: RunningService, account: AccountKeys, body: Any) -> None:
    async with http.post(f"{service.base_url}/v1/events", json=body, headers=account.headers) as r:
        assert r.status == 200, await r.text()


async def call(
    http: aiohttp.ClientSession, service: RunningService, account: AccountKeys, call_id: str, at: int, quiet: bool
) -> None:
    start = {"type": "call.started", "call_id": call_id, "to": TO, "from": "+12125550188", "at": format_ms(at)}
    await post(http, service, account, {**start, "quiet": quiet, "register": True})
    await post(http, service, account, {"type": "call.ended", "call_id": call_id, "at": format_ms(at + 30_000)})


async def listed(http: aiohttp.ClientSession, service: RunningService, account: AccountKeys) -> list[str]:
    status, body = await answer(http, service, account, "/v1/calls?limit=50")
    assert status == 200
    return sorted(c["call_id"] for c in body["data"])


async def test_a_partitions_events_past_the_horizon_take_its_old_calls_out_and_a_rebuild_agrees(
    short_horizon: RunningService, http: aiohttp.ClientSession
) -> None:
    service = short_horizon
    account = await create_account(service.settings, http, service.base_url)
    by_partition = ids_by_partition(account.account_id, service.settings.partitions)
    (old, new, *_), (elsewhere, *_) = (ids for _, ids in sorted(by_partition.items())[:2])
    now = now_ms()
    await call(http, service, account, old, now - (HOT_DAYS + 10) * DAY_MS, quiet=True)
    await call(http, service, account, elsewhere, now - (HOT_DAYS + 10) * DAY_MS, quiet=True)
    # Its own partition's time is its own day: nothing is past the horizon yet.
    assert (await answer(http, service, account, f"/v1/calls/{old}"))[0] == 200
    assert await listed(http, service, account) == sorted([old, elsewhere])

    await call(http, service, account, new, now, quiet=False)
    gone = (404, {"error": "not_found"})
    assert await answer(http, service, account, f"/v1/calls/{old}") == gone
    # The other partition has seen no event since: its old call waits for the next one there.
    assert await listed(http, service, account) == sorted([new, elsewhere])
    assert (await answer(http, service, account, f"/v1/calls/{new}"))[0] == 200

    done = await rebuild(service)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    await wait_for_status(http, "GET", f"{service.base_url}/healthz", 200, timeout_s=30)
    await settled(service.settings)
    assert await answer(http, service, account, f"/v1/calls/{old}") == gone
    assert await listed(http, service, account) == sorted([new, elsewhere])


async def test_a_call_reported_late_into_a_day_past_the_horizon_leaves_at_the_partitions_next_event(
    short_horizon: RunningService, http: aiohttp.ClientSession
) -> None:
    service = short_horizon
    account = await create_account(service.settings, http, service.base_url)
    # A partition the other test leaves alone, so that its first event here is today's.
    first, late, next_one, *_ = sorted(ids_by_partition(account.account_id, service.settings.partitions).items())[2][1]
    now = now_ms()
    await call(http, service, account, first, now, quiet=False)
    # Its day is older than any the partition had: the worker's note of the oldest day must move.
    await call(http, service, account, late, now - (HOT_DAYS + 10) * DAY_MS, quiet=True)
    assert (await answer(http, service, account, f"/v1/calls/{late}"))[0] == 200
    await call(http, service, account, next_one, now, quiet=False)
    assert await answer(http, service, account, f"/v1/calls/{late}") == (404, {"error": "not_found"})
    assert await listed(http, service, account) == sorted([first, next_one])
