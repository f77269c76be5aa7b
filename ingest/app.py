"""The aiohttp application factory: middlewares, routes, and the Kafka connections' lifetime."""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web
from prometheus_client import start_http_server

from domain.validation import InputError
from infra.settings import Settings
from ingest import (
    dashboard,
    dashboard_auth,
    dashboard_pages,
    routes_account,
    routes_evaluation,
    routes_events,
    routes_gate,
    routes_labels,
    routes_ops,
    routes_platforms,
    routes_reads,
    routes_shadow,
    twiml,
)
from ingest.errors import ApiError
from ingest.kafka_log import KafkaLog
from ingest.log import Log
from ingest.sealed import SEALED, SealedSecrets
from ingest.service import EDGE, Edge

log = logging.getLogger("callscreen.edge")

REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def route_name(request: web.Request) -> str:
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "unmatched"


def request_id_of(request: web.Request) -> str:
    """The caller's X-Request-Id when it is short and plain (it reaches log lines), else a fresh one."""
    given = request.headers.get("X-Request-Id", "")
    return given if REQUEST_ID.fullmatch(given) else uuid.uuid4().hex


async def hold(most_s: float, retry_after: str | None) -> None:
    """Wait before sending a refusal for being over a limit: `most_s`, or its Retry-After if sooner."""
    wait = most_s if retry_after is None or not retry_after.isdigit() else min(most_s, float(retry_after))
    if wait > 0:
        await asyncio.sleep(wait)


@web.middleware
async def errors_and_metrics(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure as JSON (TwiML on the gate's paths), every request counted and timed, one log line with a
    request id."""
    started = time.perf_counter()
    request_id = request_id_of(request)
    try:
        response = await handler(request)
    except ApiError as exc:
        response = exc.response()
    except InputError as exc:
        response = ApiError.of(exc).response()
    except web.HTTPRequestEntityTooLarge:
        response = ApiError(
            413, "body_too_large", limit=request.app[EDGE].settings.rules.limits.max_body_bytes
        ).response()
    except web.HTTPMethodNotAllowed as exc:
        response = ApiError(
            405, "method_not_allowed", headers={"Allow": ",".join(sorted(exc.allowed_methods))}
        ).response()
    except web.HTTPNotFound:
        response = ApiError(404, "not_found").response()
    except web.HTTPException as exc:
        response = ApiError(exc.status, exc.reason.lower().replace(" ", "_")).response()
    except Exception:
        log.exception("unhandled error", extra={"request_id": request_id})
        response = ApiError(500, "internal").response()
    if response.status == 429:
        await hold(request.app[EDGE].settings.refusal_hold_s, response.headers.get("Retry-After"))
    if (
        response.status >= 400
        and response.content_type != twiml.CONTENT_TYPE
        and routes_gate.is_gate_path(request.path)
    ):
        # The carrier reads TwiML only: its errors are `<Reject/>` with the same status and headers.
        refusal = twiml.reject(response.status)
        for name in ("Retry-After", "Allow"):
            if name in response.headers:
                refusal.headers[name] = response.headers[name]
        response = refusal
    response.headers["X-Request-Id"] = request_id
    elapsed = time.perf_counter() - started
    route = route_name(request)
    metrics = request.app[EDGE].metrics
    labels = (route, request.method, str(response.status))
    metrics.child(metrics.requests, *labels).inc()
    metrics.child(metrics.latency, *labels).observe(elapsed)
    # One line a request would bury everything else at the default level: it is there when asked for.
    if log.isEnabledFor(logging.DEBUG):
        log.debug(
            "request",
            extra={
                "request_id": request_id,
                "method": request.method,
                "route": route,
                "status": response.status,
                "ms": round(elapsed * 1000, 2),
            },
        )
    return response


def init_app(settings: Settings, connection: Log | None = None) -> web.Application:
    """The edge's application, on Kafka unless given another log (the edge's own tests use one in memory)."""
    app = web.Application(middlewares=[errors_and_metrics], client_max_size=settings.rules.limits.max_body_bytes)
    edge = Edge(settings, connection or KafkaLog(settings))
    app[EDGE] = edge
    app[SEALED] = SealedSecrets()

    async def connections(app: web.Application) -> AsyncIterator[None]:
        await edge.start()
        yield
        await edge.stop()

    async def metrics_port(app: web.Application) -> AsyncIterator[None]:
        server, thread = start_http_server(
            settings.edge_metrics_port, addr=settings.host, registry=edge.metrics.registry
        )
        yield
        server.shutdown()
        thread.join()

    app.cleanup_ctx.append(connections)
    if settings.edge_metrics_port:
        app.cleanup_ctx.append(metrics_port)
    routes_ops.add_routes(app)
    routes_account.add_routes(app)
    routes_events.add_routes(app)
    routes_gate.add_routes(app)
    routes_platforms.add_routes(app)
    routes_reads.add_routes(app)
    routes_labels.add_routes(app)
    routes_evaluation.add_routes(app)
    routes_shadow.add_routes(app)
    dashboard.setup(app, settings)
    dashboard_auth.add_routes(app)
    dashboard_pages.add_routes(app)
    return app
