"""Per-request credential and limit checks, in the precedence docs/api.md, Errors sets."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from ingest.auth import Principal, authenticate_key, authenticate_token, require_write
from ingest.errors import ApiError
from ingest.service import edge_of


def reader(request: web.Request) -> Principal:
    """A key of either scope, within the per-key read limit."""
    edge = edge_of(request)
    principal = authenticate_key(request, edge.accounts)
    edge.limit(edge.read_limiter, principal.subject)
    return principal


def writer(request: web.Request) -> Principal:
    """A full-scope key, within the same per-key request limit as reads (it is not an event post)."""
    edge = edge_of(request)
    principal = authenticate_key(request, edge.accounts)
    require_write(principal)
    edge.limit(edge.read_limiter, principal.subject)
    return principal


async def event_poster(request: web.Request) -> Principal:
    """A full key in the headers, or the ingest token in the path; both share the account's limit."""
    edge = edge_of(request)
    token = request.match_info.get("token")
    if token is not None:
        principal = authenticate_token(token, edge.accounts)
    else:
        principal = authenticate_key(request, edge.accounts)
        require_write(principal)
    await edge.limit_events(principal.account.id)
    return principal


async def json_object(request: web.Request) -> dict[str, Any]:
    """The body as a JSON object: 413 past the size limit, 400 when not JSON or not an object."""
    raw = await request.read()
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, "invalid_json") from exc
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_body")
    return body
