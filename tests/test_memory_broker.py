"""`--broker memory`: the in-memory development broker still runs the whole service, and says what it is."""

from __future__ import annotations

import socket
from pathlib import Path

import aiohttp
import pytest

from bench.service import commit_steps
from callscreen.broker import MemoryBroker
from infra.ports import free_port, listens
from tests.service import create_account, start_service

pytestmark = pytest.mark.slow

START = {"type": "call.started", "call_id": "mem-1", "to": "+14155552671", "from": "+12125550123"}


async def test_the_memory_broker_scores_follows_and_ends_a_call(tmp_path: Path, http: aiohttp.ClientSession) -> None:
    service = start_service(tmp_path / "data", "memory")
    try:
        assert service.settings.memory_broker
        account = await create_account(service.settings, http, service.base_url)
        async with http.post(f"{service.base_url}/v1/events", json=START, headers=account.headers) as r:
            assert r.status == 200
            assert (await r.json())["action"] == "allow"
        turn = {"type": "turn.ended", "call_id": "mem-1", "role": "user", "words": 3}
        async with http.post(f"{service.base_url}/v1/events", json=turn, headers=account.headers) as r:
            assert (r.status, (await r.json())["user_turns"]) == (200, 1)
        ended = {"type": "call.ended", "call_id": "mem-1"}
        async with http.post(f"{service.base_url}/v1/events", json=ended, headers=account.headers) as r:
            assert r.status == 200
        async with http.get(f"{service.base_url}/v1/calls/mem-1", headers=account.headers) as r:
            assert (r.status, (await r.json())["state"]) == (200, "ended")
        # The bench times the fold by the worker's commits, and runs on this broker too (`--broker memory`).
        steps = await commit_steps(service.settings, service.settings.app_id, until=3, timeout_s=30)
        assert steps[-1][1] == 3
    finally:
        assert service.stop() == 0
    log = (tmp_path / "data.log").read_text()
    assert "in-memory broker" in log and "gone when it stops" in log


async def test_tables_of_a_broker_that_restarted_empty_are_never_served(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    data_dir, account_id = tmp_path / "data", "acct_RestartedEmpty01"
    start = {**START, "call_id": "gone-1"}
    for _ in ("before", "after"):
        # Each `run --broker memory` starts an empty broker; the worker's tables from the first are stale.
        service = start_service(data_dir, "memory")
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
    assert "folded from another log" in (tmp_path / "data.log").read_text()


def test_a_memory_broker_whose_port_is_taken_before_it_binds_starts_on_another(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", free_port()))
        held.listen()
        taken = held.getsockname()[1]
        broker = MemoryBroker(tmp_path)
        # As if another process bound the port between its pick and Tansu's bind: it answers, but not as Tansu.
        broker.port = taken
        broker.start()
        try:
            assert broker.port != taken
            assert broker.process is not None and broker.alive()
            assert listens(broker.process.pid, broker.port)
            assert broker.url.endswith(f"127.0.0.1:{broker.port}")
        finally:
            broker.stop()
