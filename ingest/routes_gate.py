"""The carrier gate (docs/api.md, The carrier gate): `POST /v1/gate/<gate_token>`, `…/challenge` and
`…/status`, the carrier's form in and TwiML out.

A call is scored on the path every event takes (the form becomes a `call.started`, appended, and the
worker's answer awaited), then refused, challenged or forwarded to the number's platform. Every error here
is TwiML too: `ingest.app` turns the edge's errors on these paths into `<Reject/>` with their status.
"""

from __future__ import annotations

import contextlib
import logging
import re
import secrets
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import msgspec
from aiohttp import web
from twilio.request_validator import RequestValidator

from domain import gate, ids, keys
from domain.accounts import Account, Gate
from domain.events import (
    GATE_CREDENTIAL,
    AnyEvent,
    CallEnded,
    CallStarted,
    GateForwarded,
    GatePressed,
)
from domain.validation import Stamp, TimeBounds, parse_event
from infra.clock import now_ms
from infra.sealing import SecretKeyProblem
from ingest import errors, twiml
from ingest.errors import ApiError
from ingest.forward import Forwarder
from ingest.sealed import SEALED
from ingest.service import EDGE, Edge, edge_of

log = logging.getLogger("callscreen.gate")

PREFIX = "/v1/gate/"
SIGNATURE = "X-Twilio-Signature"
# One key is asked for; a longer `Digits` is kept short, as wrong.
MAX_DIGITS = 8
KEYPAD = re.compile(r"[0-9*#]*")


def is_gate_path(path: str) -> bool:
    return path.startswith(PREFIX)


@dataclass(frozen=True)
class GateRequest:
    """An authenticated carrier request: whose number it is, its gate settings and its form, and whether
    the form's `X-Twilio-Signature` verified with the number's carrier auth token (`signed`)."""

    account: Account
    number: str
    settings: Gate
    form: dict[str, str]
    raw: bytes
    signed: bool = False


FORWARDER: web.AppKey[Forwarder] = web.AppKey("forwarder", Forwarder)


def signed_url(request: web.Request, public_url: str) -> str:
    """The URL the carrier called, which its signature covers."""
    if public_url:
        return public_url.rstrip("/") + request.path_qs
    return str(request.url)


async def gate_request(request: web.Request) -> GateRequest:
    """The token (401), the account's event limit (429), the body (413), the signature when the number
    has a carrier auth token (403), in the edge's usual order."""
    edge = edge_of(request)
    token = request.match_info["token"]
    found = None
    if ids.is_well_formed(token, ids.GATE_TOKEN_PREFIX):
        found = edge.accounts.by_gate_digest(ids.digest(token))
    if found is None:
        raise ApiError(401, "invalid_token")
    account, number = found
    await edge.limit_events(account.id)
    raw = await request.read()
    form = {name: str(value) for name, value in (await request.post()).items()}
    settings = account.gates.get(number, Gate())
    signed = False
    if settings.carrier_auth_token:
        try:
            auth_token = request.app[SEALED].open(edge, settings.carrier_auth_token)
        except SecretKeyProblem as exc:
            log.warning("cannot open a carrier auth token", extra={"error": str(exc)})
            raise ApiError(503, "unavailable") from None
        url = signed_url(request, edge.settings.public_url)
        if not RequestValidator(auth_token).validate(url, form, request.headers.get(SIGNATURE, "")):
            raise ApiError(403, "invalid_signature")
        signed = True
    edge.charge_bytes(account.id, len(raw))
    return GateRequest(account, number, settings, form, raw, signed)


def stamp_for(account: Account) -> Stamp:
    """A gated event's stamp: what the carrier posts comes with the number's gate token, a path token."""
    return account.stamp(uuid.uuid4().hex, now_ms(), GATE_CREDENTIAL)


def bounds(edge: Edge) -> TimeBounds:
    return TimeBounds.of(edge.settings.rules.limits)


async def forward(request: web.Request, call: GateRequest, score: str, action: str) -> web.Response:
    """The platform's TwiML, relayed byte for byte; a short apology and a hang-up when it failed. Either
    way the outcome goes to the log for the number's `platform.degraded` detector."""
    url = call.settings.forward_url
    if not url:
        return twiml.apology()
    done = await request.app[FORWARDER].post(call.account.id, url, call.raw, score, action)
    edge = edge_of(request)
    if done.shed:
        # The account's or the host's share of forwards is full (docs/architecture.md, rule 5): the apology
        # at once, and no `gate.forwarded`, since the platform was never asked. Recorded as failed, a full
        # host share would raise `platform.degraded` on every account forwarding to that host, for forwards
        # some other account holds; the account's own slow platform is reported already, by the forwards
        # holding its share, as they end slow or timed out.
        edge.metrics.child(edge.metrics.gate_forwards_refused, str(done.error)).inc()
        log.info("forward refused, share full", extra={"error": done.error})
        return twiml.apology()
    at = now_ms()
    outcome = GateForwarded(
        id=uuid.uuid4().hex,
        account_id=call.account.id,
        call_id=call_sid(call.form),
        at=at,
        received_at=at,
        plan=call.account.plan,
        credential=GATE_CREDENTIAL,
        host=urlsplit(url).hostname or "",
        duration_ms=done.duration_ms,
        failed=done.body is None,
    )
    with contextlib.suppress(ApiError):
        # The log could not take it (logged by the edge): the caller still gets the platform's answer.
        await edge.append(edge.settings.topic("events"), keys.call(call.account.id, outcome.call_id), outcome)
    if done.body is None:
        log.info("forward failed", extra={"error": done.error, "ms": done.duration_ms})
        return twiml.apology()
    return web.Response(body=done.body, content_type=twiml.CONTENT_TYPE)


async def unavailable(request: web.Request, call: GateRequest) -> web.Response:
    """No score within the answer deadline: the number's `unavailable` choice (forward by default)."""
    await edge_of(request).screening_lost(call.account.id, call.number, call.settings.unavailable)
    if call.settings.unavailable == "reject":
        return twiml.reject(reason=gate.GATE_REJECTED)
    return await forward(request, call, "", "unavailable")


async def asked(request: web.Request, call: GateRequest, event: AnyEvent) -> dict[str, Any] | None:
    """The worker's reply, or None when no answer came in time (or the log refused the event)."""
    try:
        return await edge_of(request).ask_event(call.account.id, event)
    except ApiError as exc:
        if exc.status != 503:
            raise
        return None


async def incoming(request: web.Request) -> web.Response:
    """The carrier's incoming call: scored, then refused, challenged or forwarded."""
    edge = edge_of(request)
    call = await gate_request(request)
    event = parse_event(gate.started_body(call.form, call.number), stamp_for(call.account), bounds(edge))
    assert isinstance(event, CallStarted)
    # Drawn here, kept in the call's state by its fold, and sent only to the carrier's caller.
    digit = str(secrets.randbelow(10))
    # Only a CallSid the carrier signed may be hung up later, and only under the signed form's AccountSid.
    wanted = call.settings.hang_up_suspicious and call.account.plan == "guard"
    account_sid = gate.hang_up_account(call.form, call.signed, wanted)
    event = msgspec.structs.replace(
        event, gate_digit=digit, hang_up=account_sid is not None, carrier_account_sid=account_sid
    )
    reply = await asked(request, call, event)
    if reply is None:
        return await unavailable(request, call)
    edge.screening_back()
    if reply["status"] != 200:
        return twiml.reject(reply["status"])
    result = reply["body"]
    answer = result["answer"]
    if result["state"] == "ended" or answer["action"] == "reject":
        return twiml.reject(reason=gate.GATE_REJECTED)
    if answer["action"] == "review" and call.settings.review == "challenge":
        action = signed_url(request, edge.settings.public_url).split("?")[0] + "/challenge"
        return twiml.challenge(result["digit"], action, edge.settings.gate_challenge_timeout_s)
    return await forward(request, call, str(answer["score"]), answer["action"])


def keys_pressed(digits: str) -> str:
    """The keys as the log keeps them; anything a keypad cannot send reads as `#`, a wrong key."""
    return digits[:MAX_DIGITS] if KEYPAD.fullmatch(digits[:MAX_DIGITS]) else "#"


def call_sid(form: Mapping[str, str]) -> str:
    sid = form.get("CallSid", "")
    if not sid:
        raise ApiError(400, "missing_call_id")
    return sid


async def challenge(request: web.Request) -> web.Response:
    """The caller's keypress: the right digit forwards, a wrong one rejects, none hangs up."""
    call = await gate_request(request)
    at = now_ms()
    event = GatePressed(
        id=uuid.uuid4().hex,
        account_id=call.account.id,
        call_id=call_sid(call.form),
        at=at,
        received_at=at,
        plan=call.account.plan,
        credential=GATE_CREDENTIAL,
        digits=keys_pressed(call.form.get("Digits", "")),
    )
    reply = await asked(request, call, event)
    if reply is None:
        return await unavailable(request, call)
    edge_of(request).screening_back()
    if reply["status"] != 200:
        return twiml.reject(reply["status"])
    result = reply["body"]
    if result["result"] == gate.GATE_PASS:
        answer = result["answer"]
        return await forward(request, call, str(answer["score"]), answer["action"])
    if result["result"] == gate.GATE_FAIL:
        return twiml.reject()
    return twiml.hang_up()


async def status(request: web.Request) -> web.Response:
    """The carrier's status callback: a final status ends the record, with the carrier's duration."""
    edge = edge_of(request)
    call = await gate_request(request)
    body = gate.ended_body(call.form)
    if body is None:
        return twiml.empty()
    call_sid(call.form)
    event = parse_event(body, stamp_for(call.account), bounds(edge))
    assert isinstance(event, CallEnded)
    event = msgspec.structs.replace(event, source=gate.SOURCE, duration_s=gate.duration_of(call.form))
    reply = await asked(request, call, event)
    if reply is None:
        raise errors.unavailable()
    return twiml.empty()


def add_routes(app: web.Application) -> None:
    forwarder = Forwarder(app[EDGE].settings)
    app[FORWARDER] = forwarder

    async def close_forwarder(app: web.Application) -> None:
        await forwarder.close()

    app.on_cleanup.append(close_forwarder)
    app.router.add_post(PREFIX + "{token}", incoming)
    app.router.add_post(PREFIX + "{token}/challenge", challenge)
    app.router.add_post(PREFIX + "{token}/status", status)
