"""The edge's error contract (docs/api.md, Errors): exact statuses, codes and precedence."""

from __future__ import annotations

import aiohttp
import pytest

from tests.service import AccountKeys

START = {"type": "call.started", "call_id": "c-err", "to": "+14155552671", "from": "+12125550123"}


async def post(
    http: aiohttp.ClientSession, url: str, headers: dict[str, str], **kwargs: object
) -> tuple[int, dict[str, object]]:
    async with http.post(url, headers=headers, **kwargs) as r:  # type: ignore[arg-type]
        assert r.content_type == "application/json"
        return r.status, await r.json()


async def test_body_not_json_is_invalid_json(http: aiohttp.ClientSession, base_url: str, account: AccountKeys) -> None:
    status, body = await post(http, f"{base_url}/v1/events", account.headers, data=b"{nope")
    assert (status, body) == (400, {"error": "invalid_json"})


async def test_body_not_object_is_invalid_body(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    status, body = await post(http, f"{base_url}/v1/events", account.headers, json=[START])
    assert (status, body) == (400, {"error": "invalid_body"})


@pytest.mark.parametrize("kind", [None, "call.paused", 7])
async def test_unknown_type_is_invalid_type(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, kind: object
) -> None:
    status, body = await post(http, f"{base_url}/v1/events", account.headers, json={**START, "type": kind})
    assert (status, body) == (400, {"error": "invalid_type"})


@pytest.mark.parametrize(
    ("field", "value"),
    [("cost", "cheap"), ("register", "yes"), ("quiet", 1), ("source", 5), ("attrs", [1]), ("provider_call_id", 9)],
)
async def test_wrong_field_type_is_invalid_field(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, field: str, value: object
) -> None:
    status, body = await post(http, f"{base_url}/v1/events", account.headers, json={**START, field: value})
    assert (status, body) == (400, {"error": "invalid_field", "field": field})


@pytest.mark.parametrize("at", ["2026-01-01T00:00:00", "yesterday", "2999-01-01T00:00:00Z", 12])
async def test_bad_at_is_invalid_at(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, at: object
) -> None:
    status, body = await post(http, f"{base_url}/v1/events", account.headers, json={**START, "at": at})
    assert (status, body) == (400, {"error": "invalid_at"})


async def test_body_over_64_kib_is_413(http: aiohttp.ClientSession, base_url: str, account: AccountKeys) -> None:
    big = {**START, "source": "x", "attrs": {"note": "y" * 70_000}}
    status, body = await post(http, f"{base_url}/v1/events", account.headers, json=big)
    assert status == 413
    assert body["error"] == "body_too_large"


async def test_unknown_path_and_wrong_method(http: aiohttp.ClientSession, base_url: str) -> None:
    async with http.get(f"{base_url}/v1/nothing-here") as r:
        assert (r.status, await r.json()) == (404, {"error": "not_found"})
    async with http.delete(f"{base_url}/v1/account") as r:
        assert (r.status, await r.json()) == (405, {"error": "method_not_allowed"})


async def test_credential_is_checked_before_the_body(http: aiohttp.ClientSession, base_url: str) -> None:
    status, body = await post(http, f"{base_url}/v1/events", {}, data=b"x" * 70_000)
    assert (status, body) == (401, {"error": "missing_key"})
    status, body = await post(http, f"{base_url}/v1/events", {"Authorization": "Bearer nope"}, data=b"{")
    assert (status, body) == (401, {"error": "invalid_key"})


async def test_errors_never_leak_an_html_page(http: aiohttp.ClientSession, base_url: str, account: AccountKeys) -> None:
    async with http.post(
        f"{base_url}/v1/events", headers={**account.headers, "Content-Type": "text/html"}, data=b"<html>"
    ) as r:
        assert r.status == 400
        assert r.content_type == "application/json"
        assert await r.json() == {"error": "invalid_json"}


@pytest.mark.parametrize("url", ["https://example.com]/alerts", "https://[::1/alerts", "https://\U000d2d4e]q\\"])
async def test_webhook_url_the_url_parser_refuses_is_not_a_url(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, url: str
) -> None:
    async with http.patch(f"{base_url}/v1/account", json={"alert_webhook_url": url}, headers=account.headers) as r:
        assert r.content_type == "application/json"
        assert (r.status, await r.json()) == (400, {"error": "invalid_webhook_url", "reason": "not_a_url"})


async def test_a_number_too_short_for_e164_is_refused_where_it_is_read(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    # "+4900259" parses as a possible German number whose E.164 form, "+490259", has only six digits.
    async with http.get(f"{base_url}/v1/reputation/%2B4900259", headers=account.headers) as r:
        assert (r.status, await r.json()) == (400, {"error": "invalid_caller"})
    async with http.get(f"{base_url}/v1/score?to=%2B4900259&from=%2B12125550123", headers=account.headers) as r:
        assert (r.status, await r.json()) == (400, {"error": "invalid_to"})
    status, body = await post(http, f"{base_url}/v1/events", account.headers, json={**START, "from": "+4900259"})
    assert (status, body) == (400, {"error": "invalid_from"})
