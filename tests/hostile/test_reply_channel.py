"""The workers' reply channel: only a peer with the run's shared token may answer, frames are capped, and
the listener never binds a public or wildcard address.

On the old code anyone who reached the edge's reply port could answer any request (the correlation id
is in the event's headers on the events topic) with a body of their choosing, and announce a 4 GiB frame.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from infra import frames
from infra.settings import Settings
from ingest.replies import reply_bind
from tests.service import AccountKeys, RunningService
from tests.topics import read_topic


async def reply_address(service: RunningService, http: aiohttp.ClientSession, account: AccountKeys) -> str:
    """Where the edge listens for answers, as any reader of the events topic sees it."""
    start = {"type": "call.started", "call_id": "rc-1", "to": "+14155552671", "from": "+12125550123"}
    async with http.post(f"{service.base_url}/v1/events", json=start, headers=account.headers) as r:
        assert r.status == 200
    for record in await read_topic(service.settings, service.settings.topic("events")):
        headers = dict(record.headers or [])
        if b"rc-1" in record.value and "reply-to" in headers:
            return str(headers["reply-to"].decode())
    raise AssertionError("no reply-to header on the events topic")


async def closed_by_edge(host: str, port: int, first: bytes) -> bool:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(first)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(), timeout=5) == b""
    finally:
        writer.close()


async def test_a_peer_without_the_token_is_cut_off_and_answers_nothing(
    service: RunningService, http: aiohttp.ClientSession, account: AccountKeys
) -> None:
    host, port = (await reply_address(service, http, account)).rsplit(":", 1)
    forged: dict[str, Any] = {"corr": "x", "status": 200, "body": {"action": "allow"}}
    assert await closed_by_edge(host, int(port), frames.encode(forged))
    assert await closed_by_edge(host, int(port), frames.encode(frames.hello("not the token")))
    assert await closed_by_edge(host, int(port), frames.HEADER.pack(2**32 - 1))


async def test_a_frame_over_the_cap_is_refused_before_it_is_read() -> None:
    reader = asyncio.StreamReader()
    reader.feed_data(frames.HEADER.pack(frames.MAX_FRAME + 1) + b"{}")
    with pytest.raises(frames.FrameTooLarge):
        await frames.read(reader)
    within = asyncio.StreamReader()
    within.feed_data(frames.encode({"corr": "c", "status": 200, "body": None}))
    assert await frames.read(within) == {"corr": "c", "status": 200, "body": None}


def test_the_hello_proves_the_token_without_sending_it() -> None:
    greeting = frames.hello("s3cret")
    assert "s3cret" not in str(greeting)
    assert frames.greets(greeting, "s3cret") and not frames.greets(greeting, "other")


@pytest.mark.parametrize(
    ("host", "bind", "chosen"),
    [("127.0.0.1", "", "127.0.0.1"), ("10.0.0.5", "", "10.0.0.5"), ("0.0.0.0", "", "127.0.0.1")],
)
def test_the_listener_binds_loopback_or_private(host: str, bind: str, chosen: str) -> None:
    assert reply_bind(Settings(host=host, reply_bind=bind)) == chosen


@pytest.mark.parametrize("bind", ["0.0.0.0", "8.8.8.8", "::"])
def test_a_public_or_wildcard_bind_is_refused(bind: str) -> None:
    with pytest.raises(ValueError, match="loopback or private"):
        reply_bind(Settings(reply_bind=bind))
