"""Hang-ups only for CallSids the carrier signed, with that number's own credentials (docs/api.md, Hanging
up; README, The carrier gate).

Anyone who knows a number's gate URL can post a voice form naming any CallSid. With `hang_up_suspicious`
on, the gate used to mark such a call for a hang-up, and the alerting role ended that CallSid with the
deployment's carrier credentials. Now the owner sets the number's carrier auth token in the dashboard
(sealed on the accounts topic, never shown again), only a form whose `X-Twilio-Signature` verified with it
marks its CallSid, and the carrier is asked with that form's `AccountSid` and the number's token.

The real pipeline, a loopback Twilio-like REST API (tests.gate_stand_ins.Carrier) whose stand-in account
differs from the numbers' accounts, and an owner signed in to the dashboard over plain HTTP.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import jsonschema
import orjson
import pytest
from twilio.request_validator import RequestValidator

import schemas
from callscreen.admin import Admin
from tests.gate_stand_ins import CARRIER_ACCOUNT_SID, CARRIER_AUTH_TOKEN, Carrier, Platform
from tests.receiver import Receiver
from tests.service import AccountKeys, RunningService, settled, wait_for_status
from tests.test_gate import (
    AREAS,
    NUMBER,
    Gated,
    alerts_of,
    post_form,
    sid,
    verbs,
    voice_form,
)
from tests.test_topic_schemas import format_checker
from tests.topics import read_topic

pytestmark = [pytest.mark.pipeline, pytest.mark.slow]

PASSWORD = "correct horse battery staple"
# The number's own carrier account: not the deployment's (CARRIER_ACCOUNT_SID).
NUMBER_ACCOUNT_SID = "AC" + "2" * 32
CSRF = re.compile(r'name="csrf" value="([^"]+)"')
GATE_TOKEN = re.compile(r'id="new-gate-token">([^<]+)<')
# The gate's refusal: TwiML, never JSON or HTML.
REJECT = b"<?xml version='1.0' encoding='utf-8'?>\n<Response><Reject /></Response>"


@dataclass
class Owner:
    """An account's owner signed in to the dashboard: `browser` holds the session cookie."""

    service: RunningService
    account: AccountKeys
    browser: aiohttp.ClientSession

    @property
    def dashboard(self) -> str:
        return f"{self.service.base_url}/dashboard"

    async def live_events(self) -> str:
        async with self.browser.get(f"{self.dashboard}/live-events") as r:
            assert r.status == 200
            return await r.text()

    async def post(self, path: str, form: dict[str, str]) -> tuple[int, str, str]:
        """A form as the page posts it, with the page's own CSRF token: status, Location and body."""
        csrf = csrf_of(await self.live_events())
        async with self.browser.post(
            f"{self.dashboard}{path}", data={"csrf": csrf, **form}, allow_redirects=False
        ) as r:
            return r.status, r.headers.get("Location", ""), await r.text()

    async def gate_token(self, number: str) -> str:
        status, _, body = await self.post("/live-events/gate-token", {"number": number})
        assert status == 200
        found = GATE_TOKEN.search(body)
        assert found is not None, "the page shows a new gate token once"
        return found.group(1)

    async def save_gate(self, number: str, **fields: str) -> None:
        form = {"number": number, "review": "challenge", "unavailable": "forward", **fields}
        assert (await self.post("/live-events/gate", form))[:2] == (303, "/dashboard/live-events")


def csrf_of(page: str) -> str:
    found = CSRF.search(page)
    assert found is not None
    return found.group(1)


@pytest.fixture
async def owner(gate_service: RunningService, http: aiohttp.ClientSession) -> AsyncIterator[Owner]:
    """A new Guard account's owner, who set a password from the setup link and so is signed in."""
    email = f"owner-{uuid.uuid4().hex[:8]}@hang-up.test"
    async with Admin(gate_service.settings) as admin:
        created = await admin.account_create("guard", "hang-up", email=email)
    account = AccountKeys(
        **{k: created[k] for k in ("account_id", "key", "key_id", "ingest_token", "signing_secret", "plan")}
    )
    setup = gate_service.base_url + urlsplit(created["setup_url"]).path
    await wait_for_status(http, "GET", setup, 200, timeout_s=2.0)
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as browser:
        async with browser.get(setup) as r:
            csrf = csrf_of(await r.text())
        form = {"csrf": csrf, "username": email, "password": PASSWORD, "again": PASSWORD}
        async with browser.post(setup, data=form, allow_redirects=False) as r:
            assert (r.status, r.headers["Location"]) == (303, "/dashboard")
        yield Owner(gate_service, account, browser)


async def gate_of(owner: Owner, platform: Platform, **fields: str) -> Gated:
    """The owner's number with a gate token and hang-ups on, set through the dashboard's forms."""
    token = await owner.gate_token(NUMBER)
    await owner.save_gate(NUMBER, forward_url=f"{platform.url}/voice", hang_up_suspicious="on", **fields)
    return Gated(owner.service, owner.account, token)


def signature(token: str, gate: Gated, form: dict[str, str]) -> dict[str, str]:
    """The header Twilio sends: its published HMAC-SHA1 over the URL it called and the form."""
    return {"X-Twilio-Signature": RequestValidator(token).compute_signature(gate.url, form)}


async def barge_storm(http: aiohttp.ClientSession, gate: Gated, call_sid: str) -> dict[str, Any]:
    """The platform reports six interruptions and more within a minute (alert-level): the call's one
    `call.suspicious`, once everything settled."""
    for _ in range(7):
        barge = {"type": "interruption", "call_id": call_sid, "role": "user"}
        async with http.post(f"{gate.service.base_url}/v1/events", json=barge, headers=gate.account.headers) as r:
            assert r.status == 200
    await settled(gate.service.settings)
    (alert,) = [a for a in await alerts_of(http, gate, "call.suspicious") if a["data"]["call_id"] == call_sid]
    return alert


async def hang_up_records(service: RunningService, alert_id: str) -> list[tuple[str, Any, Any, Any]]:
    records = await read_topic(service.settings, service.settings.topic("deliveries"))
    found = [orjson.loads(r.value) for r in records]
    return [
        (d["kind"], d.get("ended"), d.get("status"), d.get("error"))
        for d in found
        if d.get("alert_id") == alert_id and d["kind"].startswith("hangup.")
    ]


_callers = itertools.count()


def own_caller() -> str:
    """A caller no other test's account has seen: the gate's tests share this service, and a caller's history
    in another account would show in the alert (its `prior`)."""
    return f"+1919555{next(_callers):04d}"


def asked_about(carrier: Carrier, call_sid: str) -> list[tuple[str, str, dict[str, str]]]:
    return [r for r in carrier.received if call_sid in r[0]]


async def test_without_the_numbers_token_a_gated_call_is_never_hung_up(
    owner: Owner, platform: Platform, carrier: Carrier, http: aiohttp.ClientSession
) -> None:
    """Hang-ups on, no carrier auth token: the form is unsigned, whatever it claims (even the deployment's
    own AccountSid, even with a signature header nobody checks), so the call is screened and forwarded as
    before but never marked, and the carrier is never asked."""
    gate = await gate_of(owner, platform)
    assert "Carrier auth token · not set" in await owner.live_events()
    call_sid = sid()
    form = voice_form(call_sid, own_caller(), StirVerstat="TN-Validation-Passed-A", AccountSid=CARRIER_ACCOUNT_SID)
    status, _, root = await post_form(http, gate.url, form, signature(CARRIER_AUTH_TOKEN, gate, form))
    assert (status, verbs(root)) == (200, ["Connect"])

    alert = await barge_storm(http, gate, call_sid)
    # The alert says what the live monitor saw, and nothing about ending the call.
    assert sorted(alert["data"]) == ["call_id", "caller", "flags", "number", "score", "seconds"]
    assert "barge_storm" in alert["data"]["flags"]
    assert asked_about(carrier, call_sid) == []
    assert await hang_up_records(owner.service, alert["id"]) == []


async def test_a_form_signed_with_the_token_set_in_the_dashboard_is_hung_up_with_the_numbers_credentials(
    owner: Owner, platform: Platform, carrier: Carrier, http: aiohttp.ClientSession
) -> None:
    auth_token = uuid.uuid4().hex
    gate = await gate_of(owner, platform, carrier_auth_token=auth_token)
    page = await owner.live_events()
    # Never shown again: the page says it is set, and nothing more.
    assert "Carrier auth token · set" in page and auth_token not in page
    # Sealed on the accounts topic, the same record `callscreen gate set --carrier-auth-token` appends.
    accounts = await read_topic(owner.service.settings, owner.service.settings.topic("accounts"))
    assert not any(auth_token.encode() in (r.value or b"") for r in accounts)
    (record,) = [
        r
        for r in map(orjson.loads, (r.value for r in accounts))
        if r["kind"] == "gate.set" and r["account_id"] == owner.account.account_id and r.get("carrier_auth_token")
    ]
    assert record["carrier_auth_token"].startswith("fernet:") and record["hang_up_suspicious"] is True

    call_sid = sid()
    form = voice_form(call_sid, own_caller(), StirVerstat="TN-Validation-Passed-A", AccountSid=NUMBER_ACCOUNT_SID)
    status, _, root = await post_form(http, gate.url, form, signature(auth_token, gate, form))
    assert (status, verbs(root)) == (200, ["Connect"])

    alert = await barge_storm(http, gate, call_sid)
    assert alert["data"]["hung_up"] is True
    assert "hang_up" not in alert and "carrier_account_sid" not in alert
    # The number's own account and token; the deployment's credentials are for another account.
    assert asked_about(carrier, call_sid) == [
        (
            f"/2010-04-01/Accounts/{NUMBER_ACCOUNT_SID}/Calls/{call_sid}.json",
            aiohttp.encode_basic_auth(NUMBER_ACCOUNT_SID, auth_token),
            {"Status": "completed"},
        )
    ]
    assert await hang_up_records(owner.service, alert["id"]) == [
        ("hangup.attempt", None, None, None),
        ("hangup.outcome", True, 200, None),
    ]
    # On the topics: the start marked with the signed form's account, the alert naming the call and the
    # account to ask, each as its published schema says.
    settings = owner.service.settings
    (start,) = [
        e
        for e in map(orjson.loads, (r.value for r in await read_topic(settings, settings.topic("events"))))
        if e.get("type") == "call.started" and e["call_id"] == call_sid
    ]
    assert (start["hang_up"], start["carrier_account_sid"]) == (True, NUMBER_ACCOUNT_SID)
    jsonschema.validate(start, schemas.load("events.schema.json"), format_checker=format_checker())
    (record,) = [
        a
        for a in map(orjson.loads, (r.value for r in await read_topic(settings, settings.topic("alerts"))))
        if a["id"] == alert["id"]
    ]
    assert (record["hang_up"], record["carrier_account_sid"]) == (call_sid, NUMBER_ACCOUNT_SID)
    jsonschema.validate(record, schemas.load("alert.schema.json"), format_checker=format_checker())


async def test_a_forged_or_unsigned_form_gets_403_twiml_and_no_hang_up(
    owner: Owner, platform: Platform, carrier: Carrier, http: aiohttp.ClientSession
) -> None:
    auth_token = uuid.uuid4().hex
    gate = await gate_of(owner, platform, carrier_auth_token=auth_token)
    victims = [sid() for _ in range(4)]
    unsigned = voice_form(victims[0], own_caller(), AccountSid=NUMBER_ACCOUNT_SID)
    wrong_token = voice_form(victims[1], own_caller(), AccountSid=NUMBER_ACCOUNT_SID)
    signed_elsewhere = voice_form(victims[2], own_caller(), AccountSid=NUMBER_ACCOUNT_SID)
    # A genuine signature, lifted from another call's form: it covers that CallSid only.
    lifted = signature(auth_token, gate, voice_form(victims[3], own_caller(), AccountSid=NUMBER_ACCOUNT_SID))
    for form, headers in [
        (unsigned, {}),
        (wrong_token, signature(CARRIER_AUTH_TOKEN, gate, wrong_token)),
        (signed_elsewhere, lifted),
        (unsigned, {"X-Twilio-Signature": ""}),
    ]:
        async with http.post(gate.url, data=form, headers=headers) as r:
            assert (r.status, r.content_type, await r.read()) == (403, "application/xml", REJECT)
    root = ET.fromstring(REJECT)
    assert (root.tag, [(c.tag, c.attrib) for c in root]) == ("Response", [("Reject", {})])
    await settled(owner.service.settings)
    for victim in victims:
        async with http.get(f"{gate.service.base_url}/v1/calls/{victim}", headers=owner.account.headers) as r:
            assert r.status == 404
        assert asked_about(carrier, victim) == []
    assert await alerts_of(http, gate, "call.suspicious") == []
    # The refusals came from the number's token: a form signed with it still gets through.
    form = voice_form(sid(), own_caller(), StirVerstat="TN-Validation-Passed-A", AccountSid=NUMBER_ACCOUNT_SID)
    status, _, root = await post_form(http, gate.url, form, signature(auth_token, gate, form))
    assert (status, verbs(root)) == (200, ["Connect"])


async def alerting_knows_the_account(owner: Owner, receiver: Receiver) -> None:
    """Returns once the alerting role's view has the owner's latest account change: a test alert reaches
    the webhook set last only through a view that has it (and everything before it, one partition)."""
    hook = f"{receiver.url}/ok/{owner.account.account_id}"
    assert (await owner.post("/channels/webhook", {"url": hook}))[0] == 303
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert (await owner.post("/channels/test", {}))[0] == 303
        for _ in range(20):
            if any(r.path == f"/ok/{owner.account.account_id}" for r in receiver.received):
                return
            await asyncio.sleep(0.1)
    raise AssertionError("no test alert reached the webhook")


async def test_a_token_cleared_since_leaves_only_the_deployments_own_account(
    owner: Owner, platform: Platform, carrier: Carrier, module_receiver: Receiver, http: aiohttp.ClientSession
) -> None:
    """Two calls signed while the number had its token, one from the deployment's own carrier account and
    one from another; the owner then clears the token. The deployment's credentials end the first (they
    are that account's); the second has no credentials left, and the carrier is not asked."""
    auth_token = uuid.uuid4().hex
    gate = await gate_of(owner, platform, carrier_auth_token=auth_token)
    calls = {CARRIER_ACCOUNT_SID: sid(), NUMBER_ACCOUNT_SID: sid()}
    for index, (account_sid, call_sid) in enumerate(calls.items()):
        caller = f"+1{AREAS[index]}5550187"
        form = voice_form(call_sid, caller, StirVerstat="TN-Validation-Passed-A", AccountSid=account_sid)
        status, _, root = await post_form(http, gate.url, form, signature(auth_token, gate, form))
        assert (status, verbs(root)) == (200, ["Connect"])
    await owner.save_gate(
        NUMBER, forward_url=f"{platform.url}/voice", hang_up_suspicious="on", carrier_auth_token_clear="on"
    )
    assert "Carrier auth token · not set" in await owner.live_events()
    await alerting_knows_the_account(owner, module_receiver)

    own = await barge_storm(http, gate, calls[CARRIER_ACCOUNT_SID])
    other = await barge_storm(http, gate, calls[NUMBER_ACCOUNT_SID])
    # The gate decided to end both (the form was signed); the carrier's answers are the records.
    assert own["data"]["hung_up"] is True and other["data"]["hung_up"] is True
    own_sid = calls[CARRIER_ACCOUNT_SID]
    assert asked_about(carrier, own_sid) == [
        (
            f"/2010-04-01/Accounts/{CARRIER_ACCOUNT_SID}/Calls/{own_sid}.json",
            aiohttp.encode_basic_auth(CARRIER_ACCOUNT_SID, CARRIER_AUTH_TOKEN),
            {"Status": "completed"},
        )
    ]
    assert await hang_up_records(owner.service, own["id"]) == [
        ("hangup.attempt", None, None, None),
        ("hangup.outcome", True, 200, None),
    ]
    assert asked_about(carrier, calls[NUMBER_ACCOUNT_SID]) == []
    assert await hang_up_records(owner.service, other["id"]) == [
        ("hangup.attempt", None, None, None),
        ("hangup.outcome", False, None, "unconfigured"),
    ]
