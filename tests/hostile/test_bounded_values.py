"""Bounded values: what an event may carry is typed and capped, so no fold can build a value over a bound.

On the old code 20 starts with a 60 KB `attrs.geo.city` were accepted and copied into detector windows,
and a value over the producer's 1 MiB limit put every worker into a crash loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from tests.service import AccountKeys, RunningService, create_account

TO = "+14155552671"


def start(call_id: str, **fields: Any) -> dict[str, Any]:
    return {"type": "call.started", "call_id": call_id, "to": TO, "from": "+12125550123", **fields}


async def post(http: aiohttp.ClientSession, base_url: str, account: AccountKeys, body: dict[str, Any]) -> Any:
    async with http.post(f"{base_url}/v1/events", json=body, headers=account.headers) as r:
        return r.status, await r.json()


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"attrs": {"geo": {"city": "x" * 129}}}, {"field": "attrs.geo.city", "limit": 128}),
        ({"attrs": {"caller_name": "n" * 129}}, {"field": "attrs.caller_name", "limit": 128}),
        ({"attrs": {"geo": {"street": "s" * 2100}}}, {"field": "attrs", "limit": 2048}),
        ({"attrs": {"forwarded_from": "ext. 12"}}, {"field": "attrs.forwarded_from"}),
        ({"attrs": {"geo": {"zip": 73301}}}, {"field": "attrs.geo.zip", "limit": 128}),
        ({"attrs": {"perf": {"turn_ms": -1}}}, {"field": "attrs.perf.turn_ms"}),
        ({"attrs": {"tokens": {"in": 1.5}}}, {"field": "attrs.tokens.in"}),
        ({"attrs": {"note": "y" * 2100}}, {"field": "attrs", "limit": 2048}),
        ({"cost": 1000.01}, {"field": "cost", "limit": 1000}),
        ({"cost_breakdown": {"llm": 5000}}, {"field": "cost_breakdown.llm", "limit": 1000}),
    ],
)
async def test_over_the_caps_is_a_clear_400(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, fields: dict[str, Any], error: dict[str, Any]
) -> None:
    assert await post(http, base_url, account, start("capped-1", **fields)) == (
        400,
        {"error": "invalid_field", **error},
    )


async def test_within_the_caps_is_kept_on_the_call(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    attrs = {
        "geo": {"city": "c" * 128, "zip": "73301", "street": "1 Main St"},
        "tokens": {"in": 10},
        "note": "n" * 1000,
    }
    assert (await post(http, base_url, account, start("kept-1", attrs=attrs, cost=1000)))[0] == 200
    async with http.get(f"{base_url}/v1/calls/kept-1", headers=account.headers) as r:
        call = await r.json()
    assert (call["attrs"], call["cost"]) == (attrs, 1000)


async def test_the_crash_loop_attempt_leaves_every_worker_up(
    service: RunningService, http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    city = "x" * 60_000
    answers = await asyncio.gather(
        *(
            post(http, base_url, account, start(f"loop-{i}", attrs={"geo": {"city": city, "zip": "73301"}}))
            for i in range(20)
        )
    )
    assert answers == [(400, {"error": "invalid_field", "field": "attrs.geo.city", "limit": 128})] * 20
    # The longest legal values, twenty times over on one number, still fold and answer.
    legal = {"geo": {"city": "x" * 128, "region": "r" * 128, "zip": "z" * 128}, "note": "n" * 2000}
    for i in range(20):
        status, _ = await post(http, base_url, account, start(f"big-{i}", attrs=legal, **{"from": f"+1212555{i:04d}"}))
        assert status == 200
    other = await create_account(service.settings, http, base_url)
    assert (await post(http, base_url, other, start("other-1")))[0] == 200
    async with http.get(f"{base_url}/healthz") as r:
        assert r.status == 200
