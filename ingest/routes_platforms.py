"""A voice platform's own webhooks (docs/api.md, Platform webhooks): `POST /v1/ingest/<platform>/<token>`,
signed by the platform, and `POST /v1/ingest/<platform>` with a full key, for a payload forwarded as it
came.

The signature is checked over the raw bytes before anything is parsed; the platform's parser
(`domain.adapters`) gives the event bodies, every one validated as `POST /v1/events` validates it before the
first is appended, so a refused payload writes nothing. All go under the call's key, so the worker folds
them in order; the answer lists each event's answer as `POST /v1/events` would give it.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

import msgspec
import orjson
from aiohttp import web
from multidict import MultiDict

from domain import gate
from domain.adapters import PARSERS, Ignored
from domain.events import AnyEvent, CallEnded, event_type
from domain.ids import derived_event_id
from domain.validation import InputError, TimeBounds, parse_event
from infra.clock import now_ms
from infra.sealing import SecretKeyProblem
from ingest.auth import Principal, authenticate_key, authenticate_token, require_write
from ingest.errors import ApiError, json_response, unavailable
from ingest.platform_signatures import VERIFIERS, Delivery, Secret
from ingest.routes_gate import signed_url
from ingest.sealed import SEALED
from ingest.service import Edge, edge_of

log = logging.getLogger("callscreen.platforms")

PREFIX = "/v1/ingest/"
# Twilio posts its form; every other platform posts JSON.
FORM_PLATFORMS = frozenset({"twilio"})


@dataclass(frozen=True)
class LastDelivery:
    """What the dashboard's Integrations page shows of a platform's latest post to this edge."""

    at: int
    status: int
    outcome: str


class Deliveries:
    """The latest delivery per account and platform on this edge: six entries an account at most."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str], LastDelivery] = {}

    def record(self, account_id: str, platform: str, status: int, outcome: str) -> None:
        self._last[(account_id, platform)] = LastDelivery(now_ms(), status, outcome)

    def last(self, account_id: str, platform: str) -> LastDelivery | None:
        return self._last.get((account_id, platform))


DELIVERIES: web.AppKey[Deliveries] = web.AppKey("platform_deliveries", Deliveries)


def platform_of(request: web.Request) -> str:
    platform = request.match_info["platform"]
    if platform not in PARSERS:
        raise ApiError(404, "unknown_platform", platform=platform[:32])
    return platform


async def signed_post(request: web.Request) -> web.Response:
    """The token path: the account's ingest token, then the platform's signature with its stored secret."""
    edge = edge_of(request)
    platform = platform_of(request)
    principal = authenticate_token(request.match_info["token"], edge.accounts)
    integration = principal.account.integrations.get(platform)
    if integration is None:
        raise ApiError(409, "integration_not_configured", platform=platform)
    await edge.limit_events(principal.account.id)
    raw = await request.read()
    form = _form(raw) if platform in FORM_PLATFORMS else None
    try:
        secret = Secret(request.app[SEALED].open(edge, integration.secret), integration.key)
    except SecretKeyProblem as exc:
        log.warning("cannot open a platform secret", extra={"platform": platform, "error": str(exc)})
        raise unavailable() from None
    delivery = Delivery(raw, request.headers, signed_url(request, edge.settings.public_url), form)
    if not VERIFIERS[platform](delivery, secret, time.time()):
        request.app[DELIVERIES].record(principal.account.id, platform, 401, "invalid_signature")
        raise ApiError(401, "invalid_signature")
    return await _ingest(request, edge, principal, platform, raw, form)


async def forwarded_post(request: web.Request) -> web.Response:
    """The forwarding path: a full key vouches for the payload, so no platform signature is asked for."""
    edge = edge_of(request)
    platform = platform_of(request)
    principal = authenticate_key(request, edge.accounts)
    require_write(principal)
    await edge.limit_events(principal.account.id)
    raw = await request.read()
    form = _form(raw) if platform in FORM_PLATFORMS else None
    return await _ingest(request, edge, principal, platform, raw, form)


async def _ingest(
    request: web.Request, edge: Edge, principal: Principal, platform: str, raw: bytes, form: MultiDict[str] | None
) -> web.Response:
    account = principal.account
    deliveries = request.app[DELIVERIES]
    try:
        parsed = PARSERS[platform](form if form is not None else _json(raw))
        if isinstance(parsed, Ignored):
            deliveries.record(account.id, platform, 200, "ignored")
            return json_response({"ignored": True, "why": parsed.why})
        # Ids from the delivery's bytes: a platform's retry of it is the same records, which the folds count
        # once whatever their type (an interruption carries no turn number to know it by).
        delivery = hashlib.sha256(raw).hexdigest()
        events = [
            _event(edge, principal, platform, derived_event_id(account.id, platform, delivery, str(n)), body, form)
            for n, body in enumerate(parsed)
        ]
    except (InputError, ApiError) as refused:
        deliveries.record(account.id, platform, refused.status, refused.code)
        raise
    edge.charge_bytes(account.id, len(raw))
    # Appended one after another under one key, so the worker folds them in this order; the answers are
    # awaited after the last append, not one round trip each. One delivery is one of the account's turns.
    answers = []
    async with edge.event_turn(account.id):
        started = time.perf_counter()
        pending = [await edge.send_event(account.id, event) for event in events]
        for event, waiting in zip(events, pending, strict=True):
            reply = await edge.answer(waiting)
            edge.metrics.child(edge.metrics.answers, event_type(event)).observe(time.perf_counter() - started)
            answers.append(reply["body"])
    failed = sum(1 for answer in answers if "error" in answer)
    deliveries.record(account.id, platform, 200, f"{len(answers)} events" + (f", {failed} refused" if failed else ""))
    return json_response({"events": answers})


def _event(
    edge: Edge,
    principal: Principal,
    platform: str,
    event_id: str,
    body: dict[str, Any],
    form: MultiDict[str] | None,
) -> AnyEvent:
    account = principal.account
    stamp = account.stamp(event_id, now_ms(), principal.credential)
    event = parse_event(body, stamp, TimeBounds.of(edge.settings.rules.limits))
    if isinstance(event, CallEnded):
        # The platform ended the call; Twilio's status callback also says how long it ran.
        duration = gate.duration_of(form) if form is not None else None
        event = msgspec.structs.replace(event, source=platform, duration_s=duration)
    return event


def _json(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, "invalid_json") from exc


def _form(raw: bytes) -> MultiDict[str]:
    """Twilio's `application/x-www-form-urlencoded` body with every value of a repeated name, as its
    signature covers them all (the parser reads the first)."""
    try:
        return MultiDict(parse_qsl(raw.decode(), keep_blank_values=True))
    except UnicodeDecodeError as exc:
        raise ApiError(400, "invalid_body") from exc


def add_routes(app: web.Application) -> None:
    app[DELIVERIES] = Deliveries()
    app.router.add_post(PREFIX + "{platform}", forwarded_post)
    app.router.add_post(PREFIX + "{platform}/{token}", signed_post)
