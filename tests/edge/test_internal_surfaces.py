"""The edge's internal surfaces: request ids reach log lines only short and plain, a dead topic follower
makes /healthz 503 (never a frozen accounts view served), and /metrics can move to a port of its own.

On the old code any X-Request-Id (64 KiB of it) went into every log line and back out, a dead follower
left /healthz at 200, and /metrics was only beside the API.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from callscreen.testing import MemoryLog
from infra.ports import free_port
from infra.settings import Settings
from ingest.app import init_app
from tests.edge.conftest import EdgeUnderTest


@pytest.mark.parametrize(
    ("given", "kept"),
    [("req-42.a:b_c", True), ("r" * 128, True), ("r" * 129, False), ("two words", False), ("", False)],
)
async def test_a_request_id_is_kept_only_short_and_plain(
    http: aiohttp.ClientSession, base_url: str, given: str, kept: bool
) -> None:
    async with http.get(f"{base_url}/healthz", headers={"X-Request-Id": given}) as r:
        answered = r.headers["X-Request-Id"]
    if kept:
        assert answered == given
    else:
        assert re.fullmatch(r"[0-9a-f]{32}", answered), answered


async def test_a_dead_follower_makes_healthz_503_until_it_follows_again(
    http: aiohttp.ClientSession, edge: EdgeUnderTest
) -> None:
    async with http.get(f"{edge.base_url}/healthz") as r:
        assert r.status == 200
    edge.log.follower_dead = True
    try:
        async with http.get(f"{edge.base_url}/healthz") as r:
            # The detail says what is missing: here the edge's view of the log.
            assert (r.status, await r.json()) == (
                503,
                {"status": "unavailable", "error": "unavailable", "following": False},
            )
    finally:
        edge.log.follower_dead = False
    async with http.get(f"{edge.base_url}/healthz") as r:
        assert r.status == 200


@pytest.fixture
async def own_metrics_port() -> AsyncIterator[tuple[str, int]]:
    port = free_port()
    settings = Settings(edge_metrics_port=port)
    server = TestServer(init_app(settings, MemoryLog(settings)))
    await server.start_server()
    yield str(server.make_url("")).rstrip("/"), port
    await server.close()


async def test_metrics_can_move_to_a_port_of_their_own(
    http: aiohttp.ClientSession, own_metrics_port: tuple[str, int]
) -> None:
    base_url, port = own_metrics_port
    async with http.get(f"{base_url}/metrics") as r:
        assert (r.status, await r.json()) == (404, {"error": "not_found"})
    async with http.get(f"http://127.0.0.1:{port}/metrics") as r:
        assert r.status == 200
        assert "callscreen_http_requests_total" in await r.text()
