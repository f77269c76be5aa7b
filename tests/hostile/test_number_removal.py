"""A number, once registered, could never be removed: a leaked ingest token filled the plan's cap for good.
`callscreen number remove` (and the dashboard's button) appends a record on the log: the number leaves the
cap and the listing, its gate token stops working, and a later call registers it again."""

from __future__ import annotations

import time
from typing import Any

import aiohttp

from callscreen.admin import Admin
from tests.service import AccountKeys, RunningService, wait_for_status

NUMBERS = ["+14155550101", "+14155550102", "+14155550103", "+14155550104"]


async def start(http: aiohttp.ClientSession, base_url: str, account: AccountKeys, call_id: str, to: str) -> Any:
    body = {"type": "call.started", "call_id": call_id, "to": to, "from": "+12125550166"}
    async with http.post(f"{base_url}/v1/events", json=body, headers=account.headers) as r:
        return r.status, await r.json()


async def listed(http: aiohttp.ClientSession, base_url: str, account: AccountKeys) -> list[str]:
    async with http.get(f"{base_url}/v1/numbers", headers=account.headers) as r:
        assert r.status == 200
        return [n["number"] for n in (await r.json())["data"]]


async def test_a_removed_number_leaves_the_cap_and_its_gate(
    service: RunningService, http: aiohttp.ClientSession, base_url: str, watch_account: AccountKeys
) -> None:
    for i, number in enumerate(NUMBERS[:3]):
        assert (await start(http, base_url, watch_account, f"n{i}", number))[0] == 200
    assert await start(http, base_url, watch_account, "n3", NUMBERS[3]) == (402, {"error": "number_limit", "cap": 3})
    async with Admin(service.settings) as admin:
        token = (await admin.token_rotate(watch_account.account_id, "gate", NUMBERS[0]))["token"]
        # The token works first: a status without a final CallStatus answers 200 once the edge knows it.
        await wait_for_status(http, "POST", f"{base_url}/v1/gate/{token}/status", 200, data={"CallSid": "CAprobe"})
        removed = await admin.number_remove(watch_account.account_id, NUMBERS[0])
    assert removed == {"account_id": watch_account.account_id, "number": NUMBERS[0], "removed": True}
    deadline = time.monotonic() + 10.0
    while NUMBERS[0] in await listed(http, base_url, watch_account):
        assert time.monotonic() < deadline, "the removed number is still listed"
    assert sorted(await listed(http, base_url, watch_account)) == NUMBERS[1:3]
    assert (await start(http, base_url, watch_account, "n4", NUMBERS[3]))[0] == 200
    # Its gate token went with it: the gate refuses it, as TwiML.
    async with http.post(f"{base_url}/v1/gate/{token}", data={"CallSid": "CAremoved", "From": "+12125550166"}) as r:
        assert (r.status, r.content_type) == (401, "application/xml")
    # The cap is full again, and a call to the removed number is a new number past it.
    assert await start(http, base_url, watch_account, "n5", NUMBERS[0]) == (402, {"error": "number_limit", "cap": 3})
