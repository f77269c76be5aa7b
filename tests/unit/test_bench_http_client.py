"""The load generator's HTTP client, against a real aiohttp server on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from bench.http_client import Client, HttpError


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[int]]]:
    """A server that echoes each request; `peers` collects each connection's client port."""
    peers: list[int] = []
    release = asyncio.Event()

    async def echo(request: web.Request) -> web.Response:
        peers.append(request.transport.get_extra_info("peername")[1])  # type: ignore[union-attr]
        body = await request.read()
        answer = b"|".join((request.method.encode(), request.path.encode(), request.headers["X-Tag"].encode(), body))
        return web.Response(status=int(request.query.get("status", "200")), body=answer)

    async def chunked(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(b"no length")
        await response.write_eof()
        return response

    async def stall(request: web.Request) -> web.Response:
        await release.wait()
        return web.Response(body=b"late")

    app = web.Application()
    app.router.add_route("*", "/echo", echo)
    app.router.add_get("/chunked", chunked)
    app.router.add_get("/stall", stall)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}", peers
    finally:
        release.set()
        await runner.cleanup()


async def test_a_request_gets_its_status_and_body_over_one_kept_alive_connection(
    server: tuple[str, list[int]],
) -> None:
    base_url, peers = server
    client = Client(base_url, connections=4, timeout_s=5.0)
    try:
        first = await client.request("POST", "/echo", b'{"a":1}', b"X-Tag: one\r\n")
        second = await client.request("GET", "/echo?status=404", b"", b"X-Tag: two\r\n")
    finally:
        client.close()
    assert first == (200, b'POST|/echo|one|{"a":1}')
    assert second == (404, b"GET|/echo|two|")
    assert len(peers) == 2 and peers[0] == peers[1]


async def test_requests_beyond_the_pool_wait_for_a_connection_and_all_are_answered(
    server: tuple[str, list[int]],
) -> None:
    base_url, peers = server
    client = Client(base_url, connections=2, timeout_s=5.0)
    try:
        answers = await asyncio.gather(
            *(client.request("POST", "/echo", str(i).encode(), b"X-Tag: t\r\n") for i in range(10))
        )
    finally:
        client.close()
    assert sorted(answers) == sorted((200, f"POST|/echo|t|{i}".encode()) for i in range(10))
    assert len(set(peers)) == 2
    assert client.opened == 2


async def test_an_answer_without_a_length_fails_and_its_connection_is_not_reused(
    server: tuple[str, list[int]],
) -> None:
    base_url, _ = server
    client = Client(base_url, connections=1, timeout_s=5.0)
    try:
        with pytest.raises(HttpError, match="without Content-Length"):
            await client.request("GET", "/chunked")
        assert client.opened == 0
        assert await client.request("GET", "/echo", b"", b"X-Tag: after\r\n") == (200, b"GET|/echo|after|")
    finally:
        client.close()


async def test_a_request_past_the_timeout_raises_and_frees_its_place_in_the_pool(
    server: tuple[str, list[int]],
) -> None:
    base_url, _ = server
    client = Client(base_url, connections=1, timeout_s=0.2)
    try:
        with pytest.raises(TimeoutError):
            await client.request("GET", "/stall")
        assert client.opened == 0
        assert await client.request("GET", "/echo", b"", b"X-Tag: next\r\n") == (200, b"GET|/echo|next|")
    finally:
        client.close()


async def test_a_refused_connection_is_an_http_error() -> None:
    client = Client("http://127.0.0.1:1", connections=1, timeout_s=5.0)
    with pytest.raises(HttpError, match="connect failed"):
        await client.request("GET", "/")
    assert client.opened == 0
