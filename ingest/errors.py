"""The edge's error contract: every failure is JSON `{"error": code, ...context}`."""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

from domain.validation import InputError


class ApiError(Exception):
    def __init__(self, status: int, code: str, headers: dict[str, str] | None = None, **context: Any) -> None:
        super().__init__(code)
        self.status = status
        self.code = code
        self.headers = headers or {}
        self.context = context

    @classmethod
    def of(cls, refused: InputError) -> ApiError:
        return cls(refused.status, refused.code, **refused.context)

    def response(self) -> web.Response:
        return json_response({"error": self.code, **self.context}, status=self.status, headers=self.headers)


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=msgspec.json.encode(body),
        status=status,
        headers=headers,
        content_type="application/json",
    )


def invalid_field(field: str) -> ApiError:
    return ApiError(400, "invalid_field", field=field)


def unavailable() -> ApiError:
    """503 `unavailable`, to be tried again in a second (docs/api.md, Errors)."""
    return ApiError(503, "unavailable", headers={"Retry-After": "1"})
