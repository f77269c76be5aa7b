"""Restarting against the same broker keeps accounts, keys, call records and alerts (the log is the truth)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from callscreen.broker import EmbeddedBroker
from callscreen.times import now_ms
from processors.worker import LOG_ID_FILE
from tests.service import RunningService, create_account, settled, start_service
from tests.traffic import script

EMBEDDED = {"CALLSCREEN_EMBEDDED_BROKER": "1"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    own = EmbeddedBroker(tmp_path_factory.mktemp("broker"))
    own.start()
    yield own.url
    own.stop()


async def snapshot(http: aiohttp.ClientSession, base_url: str, headers: dict[str, str]) -> list[object]:
    answers = []
    for path in ("/v1/calls/r-1", "/v1/calls/r-2", "/v1/calls", "/v1/numbers"):
        async with http.get(f"{base_url}{path}", headers=headers) as r:
            assert r.status == 200
            answers.append(await r.json())
    return answers


async def test_restart_keeps_accounts_keys_and_calls(broker: str, tmp_path: Path, http: aiohttp.ClientSession) -> None:
    data_dir = tmp_path / "data"
    first: RunningService = start_service(data_dir, broker, env=EMBEDDED)
    try:
        account = await create_account(first.settings, http, first.base_url)
        start = {"type": "call.started", "call_id": "r-1", "to": "+14155552671", "from": "+12125550123"}
        async with http.post(f"{first.base_url}/v1/events", json=start, headers=account.headers) as r:
            assert r.status == 200
            decided = await r.json()
        ended = {"type": "call.ended", "call_id": "r-1", "cost": 0.4}
        async with http.post(
            f"{first.base_url}/v1/events", json={**start, "call_id": "r-2"}, headers=account.headers
        ) as r:
            assert r.status == 200
        async with http.post(f"{first.base_url}/v1/events", json=ended, headers=account.headers) as r:
            assert r.status == 200
        before = await snapshot(http, first.base_url, account.headers)
    finally:
        assert first.stop() == 0
    log_id = (data_dir / "worker-0" / LOG_ID_FILE).read_text()
    second = start_service(data_dir, broker, env=EMBEDDED)
    try:
        # Same log: the worker kept its tables.
        assert (data_dir / "worker-0" / LOG_ID_FILE).read_text() == log_id
        async with http.get(f"{second.base_url}/v1/account", headers=account.headers) as r:
            assert r.status == 200
            body = await r.json()
        assert body["numbers"]["used"] == 1
        assert body["scoring"]["used_today"] == 2
        assert await snapshot(http, second.base_url, account.headers) == before
        async with http.post(f"{second.base_url}/v1/events/{account.ingest_token}", json=start) as r:
            assert r.status == 200
            assert await r.json() == {**decided, "duplicate": True}
        async with http.post(f"{second.base_url}/v1/events", json=ended, headers=account.headers) as r:
            assert r.status == 200
            assert (await r.json())["duplicate"] is True
    finally:
        assert second.stop() == 0


async def test_tables_of_a_broker_that_restarted_empty_are_never_served(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    data_dir, account_id = tmp_path / "data", "acct_RestartedEmpty01"
    start = {"type": "call.started", "call_id": "gone-1", "to": "+14155552671", "from": "+12125550123"}
    for attempt in ("before", "after"):
        # A memory-only broker each time: the second starts empty, like the embedded one after a restart.
        broker = EmbeddedBroker(tmp_path / f"broker-{attempt}")
        broker.start()
        service = start_service(data_dir, broker.url, env=EMBEDDED)
        try:
            account = await create_account(service.settings, http, service.base_url, account_id=account_id)
            async with http.get(f"{service.base_url}/v1/calls/gone-1", headers=account.headers) as r:
                # Same account id, same data dir: only stale tables could still know the call.
                assert r.status == 404
            async with http.post(f"{service.base_url}/v1/events", json=start, headers=account.headers) as r:
                assert r.status == 200
                assert "duplicate" not in await r.json()
        finally:
            assert service.stop() == 0
            broker.stop()
    log = (tmp_path / "data.log").read_text()
    assert "folded from another log" in log


async def test_a_worker_without_its_tables_recovers_them_from_the_log(
    broker: str, tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    """Table writes reach their changelogs in coalesced flushes, and an event's offset is committed only
    after the flush that covers it; a worker that lost its local tables rebuilds them from the changelogs
    and the uncommitted events, and answers exactly as before."""
    data_dir = tmp_path / "data"
    bodies = script(5, now_ms() - 10 * 60_000, 12)
    first = start_service(data_dir, broker, env=EMBEDDED)
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
    second = start_service(data_dir, broker, env=EMBEDDED)
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
