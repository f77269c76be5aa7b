"""The carrier's REST API (Twilio's shapes, docs/api.md): ending a gated call, sending a text, placing a
voice call. Plain aiohttp on the role's shared session rather than the `twilio` package's async client:
the three requests share one connection pool, one time-out and one set of outcome labels, and a record
needs only the answer's status, which a form POST gives directly.

Each is one form POST with basic auth (the deployment's account SID and auth token) and one attempt; the
caller records the outcome. `unconfigured` without the SID and token.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

import aiohttp

from alerting.stopwatch import stopwatch
from infra.settings import Settings


@dataclass(frozen=True)
class Answered:
    ok: bool
    status: int | None
    error: str | None
    duration_ms: int


def api_url(settings: Settings, *path: str) -> str:
    """`<base>/2010-04-01/Accounts/<AccountSid>/<path...>.json`, each part quoted."""
    parts = "/".join(quote(p, safe="") for p in path)
    account = quote(settings.twilio_account_sid, safe="")
    return f"{settings.twilio_api_base.rstrip('/')}/2010-04-01/Accounts/{account}/{parts}.json"


def configured(settings: Settings) -> bool:
    return bool(settings.twilio_account_sid and settings.twilio_auth_token)


async def post_form(session: aiohttp.ClientSession, settings: Settings, url: str, form: dict[str, str]) -> Answered:
    took = stopwatch()

    if not configured(settings):
        return Answered(False, None, "unconfigured", took())
    headers = {"Authorization": aiohttp.encode_basic_auth(settings.twilio_account_sid, settings.twilio_auth_token)}
    timeout = aiohttp.ClientTimeout(total=settings.carrier_timeout_s)
    try:
        async with session.post(url, data=form, headers=headers, timeout=timeout, allow_redirects=False) as answer:
            await answer.read()
            ok = 200 <= answer.status < 300
            return Answered(ok, answer.status, None if ok else f"status_{answer.status}", took())
    except TimeoutError:
        return Answered(False, None, "timeout", took())
    except (aiohttp.ClientError, OSError):
        return Answered(False, None, "refused", took())


async def hang_up(session: aiohttp.ClientSession, settings: Settings, call_sid: str) -> Answered:
    """Twilio's "update a call" with `Status=completed`."""
    return await post_form(session, settings, api_url(settings, "Calls", call_sid), {"Status": "completed"})


async def send_text(session: aiohttp.ClientSession, settings: Settings, to: str, body: str) -> Answered:
    """Twilio's "create a message": `To`, `From` (the deployment's sender number) and `Body`."""
    form = {"To": to, "From": settings.twilio_from, "Body": body}
    return await post_form(session, settings, api_url(settings, "Messages"), form)


async def place_call(session: aiohttp.ClientSession, settings: Settings, to: str, twiml: str) -> Answered:
    """Twilio's "create a call" with inline `Twiml`, so no URL needs to be reachable from the carrier."""
    form = {"To": to, "From": settings.twilio_from, "Twiml": twiml}
    return await post_form(session, settings, api_url(settings, "Calls"), form)
