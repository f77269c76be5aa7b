"""Loopback stand-ins for the carrier gate's two outside parties: the platform's voice URL, which the gate
forwards a call to, and the carrier's REST API, which a hang-up calls (docs/api.md, the carrier gate)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from aiohttp import web

# Relayed byte for byte: odd spacing and a comment survive only if nobody re-serialises it.
PLATFORM_TWIML = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Response>  <Connect><Stream url="wss://agent.example/s"/></Connect>'
    b"<!-- kept --></Response>\n"
)


@dataclass
class Platform:
    """The platform's voice URL: `/voice` answers TwiML, `/fail` 500; `/scripted` takes its turn from
    `script`: `fail` (500), `slow` (TwiML after 4 s) or `ok`."""

    url: str = ""
    received: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    script: list[str] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        self.received.append((request.path, dict(request.headers), await request.read()))
        turn = self.script.pop(0) if request.path == "/scripted" else request.path.strip("/")
        if turn == "fail":
            return web.Response(status=500)
        if turn == "slow":
            await asyncio.sleep(4)
        return web.Response(body=PLATFORM_TWIML, content_type="application/xml")


@dataclass
class Carrier:
    """The carrier's REST API: records each request to update a call, and answers as Twilio does."""

    url: str = ""
    received: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        form = {name: str(value) for name, value in (await request.post()).items()}
        self.received.append((request.path, request.headers.get("Authorization", ""), form))
        call_sid = request.path.rsplit("/", 1)[-1].removesuffix(".json")
        return web.json_response({"sid": call_sid, "status": "completed"})


CARRIER_ACCOUNT_SID = "AC" + "1" * 32
CARRIER_AUTH_TOKEN = "carrier-auth-token-for-tests"
