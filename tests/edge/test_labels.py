"""POST /v1/calls/<call_id>/label and the dashboard's Spam and Good buttons, on the edge alone (decisions
section 17)."""

from __future__ import annotations

from typing import Any

import aiohttp
import msgspec

from domain import commands, ids
from domain.accounts import stamp
from domain.people import invited, new_session_token, new_setup_token
from infra.clock import now_ms
from ingest.sessions import SESSION_COOKIE, csrf_for
from tests.edge.conftest import EdgeUnderTest
from tests.edge.test_records import violations
from tests.service import AccountKeys

TO = "+14155552671"
CALLER = "+12125550188"


async def started(http: aiohttp.ClientSession, base_url: str, account: AccountKeys, call_id: str, **end: Any) -> None:
    body = {"type": "call.started", "call_id": call_id, "to": TO, "from": CALLER}
    async with http.post(f"{base_url}/v1/events", json=body, headers=account.headers) as r:
        assert r.status == 200, await r.text()
    if end:
        async with http.post(
            f"{base_url}/v1/events", json={"type": "call.ended", "call_id": call_id, **end}, headers=account.headers
        ) as r:
            assert r.status == 200, await r.text()


async def test_a_label_answers_the_call_record_with_it(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    await started(http, base_url, account, "lab-1")
    async with http.post(f"{base_url}/v1/calls/lab-1/label", json={"label": "spam"}, headers=account.headers) as r:
        assert r.status == 200, await r.text()
        record = await r.json()
    assert (record["call_id"], record["label"]) == ("lab-1", "spam")
    assert record["labelled_at"] is not None
    assert violations("CallRecord", record) == []
    async with http.post(f"{base_url}/v1/calls/lab-1/label", json={"label": "good"}, headers=account.headers) as r:
        assert (await r.json())["label"] == "good"
    async with http.get(f"{base_url}/v1/calls/lab-1", headers=account.headers) as r:
        assert (await r.json())["label"] == "good"
    async with http.get(f"{base_url}/v1/reputation/%2B12125550188", headers=account.headers) as r:
        reputation = await r.json()
    assert reputation["labels"] == {"spam": 0, "good": 1}
    assert violations("Reputation", reputation) == []


async def test_label_refusals_follow_the_errors_precedence(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, edge: EdgeUnderTest
) -> None:
    await started(http, base_url, account, "lab-2")
    url = f"{base_url}/v1/calls/lab-2/label"
    async with http.post(url, json={"label": "spam"}) as r:
        assert (r.status, (await r.json())["error"]) == (401, "missing_key")
    read = await edge.change(commands.create_key(edge.accounts.accounts[account.account_id], "read", "labels"))
    async with http.post(url, json={"label": "spam"}, headers={"Authorization": f"Bearer {read['key']}"}) as r:
        assert (r.status, (await r.json())["error"]) == (403, "read_only_key")
    for body in ({"label": "maybe"}, {}, {"label": "spam", "note": "x"}):
        async with http.post(url, json=body, headers=account.headers) as r:
            assert (r.status, (await r.json())["error"]) == (400, "invalid_field"), body
    async with http.post(url, data=b"not json", headers=account.headers) as r:
        assert (r.status, (await r.json())["error"]) == (400, "invalid_json")
    async with http.post(f"{base_url}/v1/calls/nope/label", json={"label": "spam"}, headers=account.headers) as r:
        assert (r.status, await r.json()) == (404, {"error": "not_found"})


async def test_a_disposition_on_the_end_is_the_calls_label(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    await started(http, base_url, account, "lab-3", disposition="spam")
    async with http.get(f"{base_url}/v1/calls/lab-3", headers=account.headers) as r:
        assert (await r.json())["label"] == "spam"
    body = {"type": "call.ended", "call_id": "lab-3", "disposition": "junk"}
    async with http.post(f"{base_url}/v1/events", json=body, headers=account.headers) as r:
        assert (r.status, await r.json()) == (400, {"error": "invalid_field", "field": "disposition"})


async def test_the_call_pages_buttons_label_the_call(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, edge: EdgeUnderTest
) -> None:
    await started(http, base_url, account, "lab-4")
    owner = invited(account.account_id, "owner@example.test", "owner", new_setup_token(), now_ms(), 60_000)
    token = new_session_token()
    session = {
        "kind": "session.started",
        "account_id": account.account_id,
        "person_id": owner["person_id"],
        "session_digest": ids.digest(token),
    }
    for record in (owner, session):
        record = stamp(record, now_ms())
        await edge.log.append(edge.settings.topic("accounts"), account.account_id, msgspec.json.encode(record))
    cookie = {"Cookie": f"{SESSION_COOKIE}={token}"}
    async with http.get(f"{base_url}/dashboard/calls/lab-4", headers=cookie) as r:
        page = await r.text()
    assert r.status == 200 and 'value="spam"' in page and 'value="good"' in page
    form = {"csrf": csrf_for(token), "label": "spam"}
    async with http.post(
        f"{base_url}/dashboard/calls/lab-4/label", data=form, headers=cookie, allow_redirects=False
    ) as r:
        assert (r.status, r.headers["Location"]) == (303, "/dashboard/calls/lab-4")
    async with http.get(f"{base_url}/v1/calls/lab-4", headers=account.headers) as r:
        assert (await r.json())["label"] == "spam"
    async with http.post(
        f"{base_url}/dashboard/calls/lab-4/label", data={**form, "csrf": "forged"}, headers=cookie
    ) as r:
        assert r.status == 403
    async with http.post(f"{base_url}/dashboard/calls/lab-4/label", data={**form, "label": "meh"}, headers=cookie) as r:
        assert r.status == 400
