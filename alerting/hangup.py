"""Ending a gated call through the carrier's REST API (docs/api.md, The carrier gate, Hanging up).

`POST <base>/2010-04-01/Accounts/<AccountSid>/Calls/<CallSid>.json` with `Status=completed` and basic
auth: Twilio's "update a call" request. One attempt; the outcome is recorded by the caller.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from urllib.parse import quote

import aiohttp

from infra.settings import Settings


@dataclass(frozen=True)
class HungUp:
    ended: bool
    status: int | None
    error: str | None
    duration_ms: int


def call_url(base: str, account_sid: str, call_sid: str) -> str:
    return f"{base.rstrip('/')}/2010-04-01/Accounts/{quote(account_sid, safe='')}/Calls/{quote(call_sid, safe='')}.json"


async def hang_up(session: aiohttp.ClientSession, settings: Settings, call_sid: str) -> HungUp:
    """Ask the carrier to end the call; `unconfigured` without the deployment's carrier credentials."""
    started = time.monotonic()

    def took() -> int:
        return int((time.monotonic() - started) * 1000)

    if not settings.twilio_account_sid or not settings.twilio_auth_token:
        return HungUp(False, None, "unconfigured", took())
    headers = {"Authorization": aiohttp.encode_basic_auth(settings.twilio_account_sid, settings.twilio_auth_token)}
    timeout = aiohttp.ClientTimeout(total=settings.carrier_timeout_s)
    url = call_url(settings.twilio_api_base, settings.twilio_account_sid, call_sid)
    try:
        async with session.post(
            url, data={"Status": "completed"}, headers=headers, timeout=timeout, allow_redirects=False
        ) as answer:
            await answer.read()
            ok = 200 <= answer.status < 300
            return HungUp(ok, answer.status, None if ok else f"status_{answer.status}", took())
    except TimeoutError:
        return HungUp(False, None, "timeout", took())
    except (aiohttp.ClientError, OSError):
        return HungUp(False, None, "refused", took())
