"""Operational endpoints: health, Prometheus metrics, and the OpenAPI document."""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

import schemas
from ingest.errors import json_response
from ingest.service import EDGE, Edge, edge_of


async def healthz(request: web.Request) -> web.Response:
    edge = edge_of(request)
    problems = edge.unhealthy()
    if not problems:
        return json_response({"status": "ok"})
    body = {"status": "unavailable", "error": "unavailable", **problems}
    return json_response(body, status=503, headers={"Retry-After": "1"})


async def metrics(request: web.Request) -> web.Response:
    body = generate_latest(edge_of(request).metrics.registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def openapi(request: web.Request) -> web.Response:
    return web.Response(body=schemas.raw("openapi.json"), content_type="application/json")


def edge_of_app(app: web.Application) -> Edge:
    return app[EDGE]


def add_routes(app: web.Application) -> None:
    app.router.add_get("/healthz", healthz)
    if not edge_of_app(app).settings.edge_metrics_port:
        app.router.add_get("/metrics", metrics)
    app.router.add_get("/v1/openapi.json", openapi)
