"""The edge's line per request is at debug level: at the default level a terminal shows what matters."""

from __future__ import annotations

import logging

import aiohttp
import pytest


def request_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, str, int]]:
    return [
        (r.levelname, r.__dict__["method"], r.__dict__["route"], r.__dict__["status"])
        for r in caplog.records
        if r.name == "callscreen.edge" and r.getMessage() == "request"
    ]


async def test_a_request_is_logged_at_debug_only(
    http: aiohttp.ClientSession, base_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="callscreen.edge"):
        async with http.get(f"{base_url}/v1/account") as r:
            assert r.status == 401
    assert request_lines(caplog) == []
    with caplog.at_level(logging.DEBUG, logger="callscreen.edge"):
        async with http.get(f"{base_url}/v1/account") as r:
            assert r.status == 401
    assert request_lines(caplog) == [("DEBUG", "GET", "/v1/account", 401)]
