"""A real HTTPS webhook receiver on loopback that records every delivery exactly as it arrived."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import trustme
from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.Response]]
# As long as the service waits for an answer (its 8 s time-out).
HANG_S = 8.0


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


@dataclass
class Receiver:
    """Answers 204; `/slow/…` after 10 s, `/hang/…` after 8 s, `/hold/…` once released, `/status/<code>/…`
    with that status."""

    url: str = ""
    received: list[Received] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.Response:
        self.received.append(Received(request.path, dict(request.headers), await request.read(), time.monotonic()))
        self.arrived.set()
        if request.path.startswith("/slow"):
            await asyncio.sleep(10)
        if request.path.startswith("/hang"):
            await asyncio.sleep(HANG_S)
        if request.path.startswith("/hold"):
            await self.release.wait()
        if request.path.startswith("/status/"):
            return web.Response(status=int(request.path.split("/")[2]))
        return web.Response(status=204)

    def for_alert(self, alert_id: str) -> list[Received]:
        return [r for r in self.received if orjson.loads(r.body)["id"] == alert_id]


def receiver_env(ca_file: Path) -> dict[str, str]:
    """What a service needs to deliver to a receiver here: trust in its CA, and its loopback address and
    ephemeral port allowed."""
    return {
        "CALLSCREEN_WEBHOOK_CA_FILE": str(ca_file),
        "CALLSCREEN_WEBHOOK_ALLOW_PRIVATE": "1",
        "CALLSCREEN_WEBHOOK_PORTS": "*",
    }


@contextlib.asynccontextmanager
async def https_site(ca: trustme.CA, handle: Handler) -> AsyncIterator[str]:
    """`handle` answering every POST on 127.0.0.1, with a certificate from `ca`; yields the base URL."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    app = web.Application()
    app.router.add_post("/{tail:.*}", handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"https://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def serving(ca: trustme.CA) -> AsyncIterator[Receiver]:
    """A receiver with a certificate from `ca` for 127.0.0.1 (the service trusts `ca` by its CA file)."""
    hook = Receiver()
    async with https_site(ca, hook.handle) as url:
        hook.url = url
        try:
            yield hook
        finally:
            hook.release.set()
