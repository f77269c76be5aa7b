"""POST /v1/shadow and GET /v1/shadow/<id> at the edge alone (docs/api.md, Shadow runs): the request it
appends to the shadow topic, the refusals, and a run's state as the shadow topic tells it, here written
in the shadow role's place."""

from __future__ import annotations

from typing import Any

import aiohttp
import msgspec

from domain import commands
from domain.shadow import DONE, PROGRESS, RESULT
from domain.times import format_ms
from infra.clock import now_ms
from tests.edge.conftest import EdgeUnderTest
from tests.service import AccountKeys

WINDOW = {"since": format_ms(now_ms() - 86_400_000), "until": format_ms(now_ms())}


async def role_writes(edge: EdgeUnderTest, account: AccountKeys, run_id: str, kind: str, **fields: Any) -> None:
    record = {"kind": kind, "id": run_id, "account_id": account.account_id, **fields, "at": format_ms(now_ms())}
    await edge.log.append(edge.settings.topic("shadow"), account.account_id, msgspec.json.encode(record))


async def test_a_run_is_asked_for_read_back_while_running_and_done_and_refused_twice(
    edge: EdgeUnderTest, account: AccountKeys
) -> None:
    headers = {"Authorization": f"Bearer {account.key}"}
    body = {**WINDOW, "policy": {"thresholds": {"reject": 0.6}, "weights": {}, "off": []}}
    async with aiohttp.ClientSession(edge.base_url, headers=headers) as http:
        async with http.post("/v1/shadow", json=body) as r:
            assert r.status == 202
            started = await r.json()
        run_id = started["id"]
        assert started == {"id": run_id, "state": "running"} and len(run_id) == len("shd_") + 16
        (requested,) = [v for t, _, v in edge.log.records if t == edge.settings.topic("shadow") and v["id"] == run_id]
        assert requested["kind"] == "shadow.requested" and requested["account_id"] == account.account_id
        assert requested["policy"] == {"thresholds": {"reject": 0.6}, "weights": {}, "off": []}
        assert (requested["since"], requested["until"]) == (WINDOW["since"], WINDOW["until"])
        async with http.post("/v1/shadow", json=body) as r:
            assert (r.status, await r.json()) == (409, {"error": "shadow_running"})

        await role_writes(edge, account, run_id, PROGRESS, progress=0.5, calls=3)
        async with http.get(f"/v1/shadow/{run_id}") as r:
            running = await r.json()
        assert (running["state"], running["progress"], running["calls"], running["flipped"]) == ("running", 0.5, 3, [])
        assert running["matrix"]["review"] == {"allow": 0, "review": 0, "reject": 0}

        flipped = [
            {
                "call_id": f"c{i}",
                "at": format_ms(now_ms()),
                "from": "review",
                "to": "reject",
                "live": {"action": "review", "score": 0.7, "reasons": ["rate_exceeded"]},
                "shadow": {"action": "reject", "score": 0.7, "reasons": ["rate_exceeded"]},
            }
            for i in range(1001)
        ]
        summary = {"calls": 1001, "matrix": running["matrix"], "labels": running["labels"], "daily": []}
        await role_writes(edge, account, run_id, RESULT, part=0, summary=summary, flipped=flipped[:1000])
        await role_writes(edge, account, run_id, RESULT, part=1, flipped=flipped[1000:])
        await role_writes(edge, account, run_id, DONE, parts=2)
        async with http.get(f"/v1/shadow/{run_id}") as r:
            done = await r.json()
        assert (done["state"], done["progress"], done["calls"]) == ("done", 1.0, 1001)
        assert done["flipped"] == flipped[:1000]
        async with http.get(f"/v1/shadow/{run_id}?format=csv") as r:
            assert r.status == 200 and r.content_type == "text/csv"
            rows = (await r.text()).splitlines()
        assert len(rows) == 1002 and rows[-1].startswith("c1000,") and rows[-1].endswith(",rate_exceeded,rate_exceeded")
        # Done: the next is taken.
        async with http.post("/v1/shadow", json=body) as r:
            assert r.status == 202


async def test_refusals_come_in_the_contracts_order(edge: EdgeUnderTest, account: AccountKeys) -> None:
    headers = {"Authorization": f"Bearer {account.key}"}
    async with aiohttp.ClientSession(edge.base_url) as http:
        async with http.post("/v1/shadow", json={**WINDOW, "policy": {}}) as r:
            assert (r.status, await r.json()) == (401, {"error": "missing_key"})
        reader = await edge.change(commands.create_key(edge.accounts.accounts[account.account_id], "read", "r"))
        read_only = {"Authorization": f"Bearer {reader['key']}"}
        async with http.post("/v1/shadow", json={**WINDOW, "policy": {}}, headers=read_only) as r:
            assert (r.status, (await r.json())["error"]) == (403, "read_only_key")
        async with http.post("/v1/shadow", json={**WINDOW, "policy": {"off": ["trusted"]}}, headers=headers) as r:
            assert (r.status, await r.json()) == (400, {"error": "invalid_field", "field": "policy.off"})
        async with http.get("/v1/shadow/shd_0123456789abcdef", headers=headers) as r:
            assert (r.status, await r.json()) == (404, {"error": "not_found"})
