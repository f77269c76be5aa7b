"""A real HTTPS webhook receiver on loopback that records every delivery exactly as it arrived."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import orjson
import trustme
from aiohttp import web

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


@contextlib.asynccontextmanager
async def serving(ca: trustme.CA) -> AsyncIterator[Receiver]:
    """A receiver with a certificate from `ca` for 127.0.0.1 (the service trusts `ca` by its CA file)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    hook = Receiver()
    app = web.Application()
    app.router.add_post("/{tail:.*}", hook.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    hook.url = f"https://127.0.0.1:{port}"
    try:
        yield hook
    finally:
        hook.release.set()
        await runner.cleanup()
