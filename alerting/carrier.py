"""The carrier's REST API (Twilio's shapes, docs/api.md): ending a gated call, sending a text, placing a
voice call. Plain aiohttp on the role's shared session rather than the `twilio` package's async client:
the three requests share one connection pool, one time-out and one set of outcome labels, and a record
needs only the answer's status, which a form POST gives directly.

Each is one form POST with basic auth and one attempt; the caller records the outcome. Texts and voice
calls use the deployment's account SID and auth token; a hang-up uses the gated number's own carrier
account (`hang_up_credentials`). `unconfigured` without credentials.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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


@dataclass(frozen=True)
class Credentials:
    """A carrier account's SID and auth token, for basic auth; the token stays out of every repr."""

    account_sid: str
    auth_token: str = field(repr=False)


def deployment(settings: Settings) -> Credentials | None:
    """`CALLSCREEN_TWILIO_ACCOUNT_SID` / `CALLSCREEN_TWILIO_AUTH_TOKEN`, when both are set."""
    if not (settings.twilio_account_sid and settings.twilio_auth_token):
        return None
    return Credentials(settings.twilio_account_sid, settings.twilio_auth_token)


def hang_up_credentials(account_sid: str, number_token: str, own: Credentials | None) -> Credentials | None:
    """Whose credentials end a gated call: the AccountSid of the form the carrier signed with the number's
    own auth token, as that number's settings hold it now; the deployment's (`own`) only when the number has
    no token any more and the deployment's account is the form's. Otherwise none: the deployment's token
    must never end a call on somebody else's carrier account."""
    if not account_sid:
        return None
    if number_token:
        return Credentials(account_sid, number_token)
    if own is not None and own.account_sid == account_sid:
        return own
    return None


def api_url(settings: Settings, account_sid: str, *path: str) -> str:
    """`<base>/2010-04-01/Accounts/<AccountSid>/<path...>.json`, each part quoted."""
    parts = "/".join(quote(p, safe="") for p in path)
    account = quote(account_sid, safe="")
    return f"{settings.twilio_api_base.rstrip('/')}/2010-04-01/Accounts/{account}/{parts}.json"


async def post_form(
    session: aiohttp.ClientSession,
    settings: Settings,
    credentials: Credentials | None,
    path: tuple[str, ...],
    form: dict[str, str],
) -> Answered:
    """One POST of `form` to the account's `path`; `unconfigured`, and no request, without credentials."""
    took = stopwatch()
    if credentials is None:
        return Answered(False, None, "unconfigured", took())
    url = api_url(settings, credentials.account_sid, *path)
    headers = {"Authorization": aiohttp.encode_basic_auth(credentials.account_sid, credentials.auth_token)}
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


async def hang_up(
    session: aiohttp.ClientSession, settings: Settings, credentials: Credentials | None, call_sid: str
) -> Answered:
    """Twilio's "update a call" with `Status=completed`, on the account `credentials` name."""
    return await post_form(session, settings, credentials, ("Calls", call_sid), {"Status": "completed"})


async def send_text(session: aiohttp.ClientSession, settings: Settings, to: str, body: str) -> Answered:
    """Twilio's "create a message": `To`, `From` (the deployment's sender number) and `Body`."""
    form = {"To": to, "From": settings.twilio_from, "Body": body}
    return await post_form(session, settings, deployment(settings), ("Messages",), form)


async def place_call(session: aiohttp.ClientSession, settings: Settings, to: str, twiml: str) -> Answered:
    """Twilio's "create a call" with inline `Twiml`, so no URL needs to be reachable from the carrier."""
    form = {"To": to, "From": settings.twilio_from, "Twiml": twiml}
    return await post_form(session, settings, deployment(settings), ("Calls",), form)
