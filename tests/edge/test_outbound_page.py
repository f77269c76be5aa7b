"""The dashboard's Outbound page and the edge's stamp of outbound settings, on the edge alone (decisions
section 18): the form saves the settings, a bad value is refused naming its field, a pause shows with its
Resume button, and each outbound start is answered by the settings and pause in force."""

from __future__ import annotations

from typing import Any

import aiohttp
import msgspec

from domain import ids
from domain.accounts import stamp
from domain.outbound import Outbound, pause_record
from domain.people import invited, new_session_token, new_setup_token
from domain.times import format_ms
from infra.clock import now_ms
from ingest.sessions import SESSION_COOKIE, csrf_for
from tests.edge.conftest import EdgeUnderTest
from tests.service import AccountKeys

AGENT = "+14155552671"


async def append(edge: EdgeUnderTest, account: AccountKeys, record: dict[str, Any]) -> None:
    record = stamp(record, now_ms())
    await edge.log.append(edge.settings.topic("accounts"), account.account_id, msgspec.json.encode(record))


async def owner_cookie(edge: EdgeUnderTest, account: AccountKeys) -> tuple[dict[str, str], str]:
    owner = invited(account.account_id, "owner@example.test", "owner", new_setup_token(), now_ms(), 60_000)
    token = new_session_token()
    await append(edge, account, owner)
    session = {"kind": "session.started", "account_id": account.account_id, "person_id": owner["person_id"]}
    await append(edge, account, {**session, "session_digest": ids.digest(token)})
    return {"Cookie": f"{SESSION_COOKIE}={token}"}, csrf_for(token)


async def dial(http: aiohttp.ClientSession, base_url: str, account: AccountKeys, call_id: str, to: str) -> Any:
    body = {"type": "call.started", "call_id": call_id, "direction": "outbound", "from": AGENT, "to": to}
    async with http.post(f"{base_url}/v1/events", json=body, headers=account.headers) as r:
        assert r.status == 200, await r.text()
        return await r.json()


async def test_the_outbound_page_saves_refuses_shows_a_pause_and_resumes(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, edge: EdgeUnderTest
) -> None:
    cookie, csrf = await owner_cookie(edge, account)
    page_url = f"{base_url}/dashboard/outbound"
    async with http.get(page_url, headers=cookie) as r:
        page = await r.text()
    assert r.status == 200 and 'name="countries"' in page and 'href="/dashboard/outbound"' in page
    assert "Resume outbound calls" not in page
    assert (await dial(http, base_url, account, "ob-1", "+16135550123"))["reasons"] == ["destination_not_allowed"]

    form = {"csrf": csrf, "countries": "us, ca", "transfer": "+1202555 +44", "pause_on": "critical"}
    async with http.post(page_url, data=form, headers=cookie, allow_redirects=False) as r:
        assert (r.status, r.headers["Location"]) == (303, "/dashboard/outbound?saved=1")
    saved = edge.accounts.accounts[account.account_id].outbound
    assert saved == Outbound(countries=["CA", "US"], transfer=["+1202555", "+44"])
    assert (await dial(http, base_url, account, "ob-2", "+16135550123"))["reasons"] == []
    async with http.post(page_url, data={**form, "countries": "USA"}, headers=cookie) as r:
        assert r.status == 400 and "refused at countries" in await r.text()
    async with http.post(page_url, data={**form, "csrf": "forged"}, headers=cookie) as r:
        assert r.status == 403

    at = format_ms(now_ms())
    await append(
        edge, account, pause_record(account.account_id, "alrt_" + "a" * 20, "number.spend_exceeded", AGENT, at)
    )
    paused = await dial(http, base_url, account, "ob-3", "+12025550143")
    assert (paused["score"], paused["action"], paused["reasons"]) == (1.0, "reject", ["outbound_paused"])
    inbound = {"type": "call.started", "call_id": "in-1", "from": "+12025550143", "to": AGENT}
    async with http.post(f"{base_url}/v1/events", json=inbound, headers=account.headers) as r:
        assert (await r.json())["reasons"] == []
    async with http.get(page_url, headers=cookie) as r:
        page = await r.text()
    assert "Resume outbound calls" in page and "number.spend_exceeded" in page
    async with http.post(f"{page_url}/resume", data={"csrf": csrf}, headers=cookie, allow_redirects=False) as r:
        assert (r.status, r.headers["Location"]) == (303, "/dashboard/outbound?resumed=1")
    assert edge.accounts.accounts[account.account_id].outbound == saved
    assert (await dial(http, base_url, account, "ob-4", "+12025550143"))["reasons"] == []
    async with http.post(f"{page_url}/resume", data={"csrf": csrf}, headers=cookie) as r:
        assert r.status == 400 and "nothing to resume" in await r.text()
