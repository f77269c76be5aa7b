"""The carrier gate through the real pipeline (docs/api.md, The carrier gate): Twilio-shaped voice-webhook
forms in, TwiML out, parsed with an XML parser; a loopback HTTPS platform stand-in for forwards."""

from __future__ import annotations

import asyncio
import time
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import aiohttp
import orjson
import pytest
from twilio.request_validator import RequestValidator

from callscreen.admin import Admin
from tests.gate_stand_ins import PLATFORM_TWIML, Carrier, Platform
from tests.service import AccountKeys, RunningService, create_account, settled
from tests.topics import read_topic

pytestmark = [pytest.mark.pipeline, pytest.mark.slow]

NUMBER = "+14155550100"
CALLER = "+12125550142"
# Callers far apart, so that no pattern (a rotating run, a prefix cluster) joins them.
AREAS = ("212", "310", "617", "646", "718", "305", "347", "929")
AUTH_TOKEN = "12345678901234567890123456789012"


@dataclass
class Gated:
    service: RunningService
    account: AccountKeys
    token: str

    @property
    def url(self) -> str:
        return f"{self.service.base_url}/v1/gate/{self.token}"


async def gated(service: RunningService, http: aiohttp.ClientSession, number: str = NUMBER, **settings: Any) -> Gated:
    """A fresh account whose number has a gate token and these gate settings, once the edge knows them."""
    account = await create_account(service.settings, http, service.base_url)
    async with Admin(service.settings) as admin:
        # Settings first: once the edge knows the token (one account, one partition, in order) it knows them.
        await admin.gate_set(account.account_id, number, **settings)
        token = (await admin.token_rotate(account.account_id, "gate", number))["token"]
    found = Gated(service, account, token)
    deadline = time.monotonic() + 1.0
    while True:
        # A status without a final CallStatus changes nothing; it answers 200 once the token is known.
        # (403 when the number wants a signature: known too.)
        async with http.post(f"{found.url}/status", data={"CallSid": "CAprobe"}) as r:
            if r.status != 401:
                return found
        assert time.monotonic() < deadline, "the edge did not learn the gate token in time"
        await asyncio.sleep(0.02)


def voice_form(call_sid: str, caller: str = CALLER, **extra: str) -> dict[str, str]:
    """The parameters Twilio posts to a number's voice URL when a call comes in."""
    return {
        "AccountSid": "AC" + "0" * 32,
        "ApiVersion": "2010-04-01",
        "CallSid": call_sid,
        "CallStatus": "ringing",
        "Direction": "inbound",
        "From": caller,
        "To": NUMBER,
        "Called": NUMBER,
        "Caller": caller,
        "FromCity": "NEW YORK",
        "FromState": "NY",
        "FromZip": "10001",
        "FromCountry": "US",
        "ToCity": "SAN FRANCISCO",
        "ToState": "CA",
        "ToZip": "94105",
        "ToCountry": "US",
        **extra,
    }


def platform_report(call_id: str, call_sid: str) -> dict[str, Any]:
    """The platform's `call.started` for the call the carrier knows as `call_sid`."""
    return {
        "type": "call.started",
        "call_id": call_id,
        "provider_call_id": call_sid,
        "to": NUMBER,
        "from": CALLER,
        "attrs": {"answered_by": "human"},
    }


def sid() -> str:
    return "CA" + uuid.uuid4().hex


async def post_form(
    http: aiohttp.ClientSession, url: str, form: dict[str, str], headers: dict[str, str] | None = None
) -> tuple[int, str, ET.Element]:
    async with http.post(url, data=form, headers=headers) as r:
        return r.status, r.content_type, ET.fromstring(await r.read())


async def call_record(http: aiohttp.ClientSession, gate: Gated, call_id: str) -> dict[str, Any]:
    async with http.get(f"{gate.service.base_url}/v1/calls/{call_id}", headers=gate.account.headers) as r:
        assert r.status == 200
        record: dict[str, Any] = await r.json()
        return record


def verbs(root: ET.Element) -> list[str]:
    return [child.tag for child in root]


async def test_stir_verstat_values_become_attestations_and_forward_or_challenge(
    gate_service: RunningService, platform: Platform, http: aiohttp.ClientSession
) -> None:
    gate = await gated(gate_service, http, forward_url=f"{platform.url}/voice")
    cases = {
        "TN-Validation-Passed-A": "A",
        "TN-Validation-Passed-B": "B",
        "TN-Validation-Passed-C": "C",
        "TN-Validation-Failed-A": "failed",
        "TN-Validation-Failed-B": "failed",
        "TN-Validation-Failed-C": "failed",
        "No-TN-Validation": "none",
        None: "none",
    }
    for index, (stir, attestation) in enumerate(cases.items()):
        call_sid = sid()
        extra = {"CallerName": "ACME LTD", "ForwardedFrom": "+14155550199"} if index == 0 else {}
        if stir is not None:
            extra["StirVerstat"] = stir
        status, content_type, root = await post_form(
            http, gate.url, voice_form(call_sid, f"+1{AREAS[index]}5550142", **extra)
        )
        assert (status, content_type) == (200, "application/xml")
        record = await call_record(http, gate, call_sid)
        assert record["attrs"]["attestation"] == attestation
        assert record["attrs"]["carrier"] == "twilio"
        assert record["attrs"]["geo"] == {"city": "NEW YORK", "region": "NY", "zip": "10001", "country": "US"}
        assert record["source"] == "gate"
        assert record["provider_call_id"] == call_sid
        if index == 0:
            assert record["attrs"]["caller_name"] == "ACME LTD"
            assert record["attrs"]["forwarded_from"] == "+14155550199"
        if attestation == "failed":
            assert verbs(root) == ["Gather"]
        else:
            assert verbs(root) == ["Connect"]


async def test_allow_forwards_the_form_unchanged_and_relays_the_twiml_byte_for_byte(
    gate_service: RunningService, platform: Platform, http: aiohttp.ClientSession
) -> None:
    gate = await gated(gate_service, http, forward_url=f"{platform.url}/voice")
    call_sid = sid()
    form = voice_form(call_sid, StirVerstat="TN-Validation-Passed-A")
    async with http.post(gate.url, data=form) as r:
        assert r.status == 200
        assert r.content_type == "application/xml"
        assert await r.read() == PLATFORM_TWIML
    path, headers, body = next(p for p in platform.received if call_sid.encode() in p[2])
    assert path == "/voice"
    assert {k: v[0] for k, v in parse_qs(body.decode()).items()} == form
    assert headers["X-Callscreen-Action"] == "allow"
    assert headers["X-Callscreen-Score"] == "0.0"


async def test_a_platform_that_fails_gets_the_caller_an_apology(
    gate_service: RunningService, platform: Platform, http: aiohttp.ClientSession
) -> None:
    gate = await gated(gate_service, http, forward_url=f"{platform.url}/fail")
    status, _, root = await post_form(http, gate.url, voice_form(sid(), StirVerstat="TN-Validation-Passed-A"))
    assert status == 200
    assert verbs(root) == ["Say", "Hangup"]


async def alerts_of(http: aiohttp.ClientSession, gate: Gated, kind: str) -> list[dict[str, Any]]:
    async with http.get(f"{gate.service.base_url}/v1/alerts?type={kind}", headers=gate.account.headers) as r:
        assert r.status == 200
        found: list[dict[str, Any]] = (await r.json())["data"]
        return found


async def test_three_bad_forwards_to_a_host_raise_one_platform_degraded(
    gate_service: RunningService, platform: Platform, http: aiohttp.ClientSession
) -> None:
    gate = await gated(gate_service, http, forward_url=f"{platform.url}/scripted")
    platform.script = ["ok", "fail", "slow", "fail", "fail"]
    answers = []
    for index in range(5):
        form = voice_form(sid(), f"+1{AREAS[index]}5550143", StirVerstat="TN-Validation-Passed-A")
        status, _, root = await post_form(http, gate.url, form)
        answers.append((status, verbs(root)))
    # A slow platform's answer is still relayed; a failed one gets the apology.
    connect, apology = (200, ["Connect"]), (200, ["Say", "Hangup"])
    assert answers == [connect, apology, connect, apology, apology]
    await settled(gate_service.settings)
    (alert,) = await alerts_of(http, gate, "platform.degraded")
    assert alert["data"] == {
        "number": NUMBER,
        "host": "127.0.0.1",
        "bad": 3,
        "calls": 4,
        "slow_ms": 3000,
        "window_min": 5,
    }
    assert alert["severity"] == "critical"


async def test_a_suspicious_gated_call_is_hung_up_once_through_the_carrier(
    gate_service: RunningService, platform: Platform, carrier: Carrier, http: aiohttp.ClientSession
) -> None:
    gate = await gated(
        gate_service, http, forward_url=f"{platform.url}/voice", hang_up_suspicious=True, carrier_auth_token=AUTH_TOKEN
    )
    call_sid = sid()
    form = voice_form(call_sid, StirVerstat="TN-Validation-Passed-A")
    signed = {"X-Twilio-Signature": RequestValidator(AUTH_TOKEN).compute_signature(gate.url, form)}
    status, _, root = await post_form(http, gate.url, form, signed)
    assert (status, verbs(root)) == (200, ["Connect"])
    # The platform reports the call's turns: six interruptions within a minute, a barge storm (alert-level).
    for _ in range(7):
        barge = {"type": "interruption", "call_id": call_sid, "role": "user"}
        async with http.post(f"{gate_service.base_url}/v1/events", json=barge, headers=gate.account.headers) as r:
            assert r.status == 200
    await settled(gate_service.settings)
    (alert,) = await alerts_of(http, gate, "call.suspicious")
    assert alert["data"]["hung_up"] is True
    assert alert["data"]["call_id"] == call_sid
    assert "barge_storm" in alert["data"]["flags"]
    # The number's own carrier account (the signed form's AccountSid) and auth token, not the deployment's.
    asked = [r for r in carrier.received if call_sid in r[0]]
    account_sid = form["AccountSid"]
    assert asked == [
        (
            f"/2010-04-01/Accounts/{account_sid}/Calls/{call_sid}.json",
            aiohttp.encode_basic_auth(account_sid, AUTH_TOKEN),
            {"Status": "completed"},
        )
    ]
    outcomes = [
        orjson.loads(record.value)
        for record in await read_topic(gate_service.settings, gate_service.settings.topic("deliveries"))
        if orjson.loads(record.value).get("alert_id") == alert["id"]
    ]
    hang_ups = [(o["kind"], o.get("ended"), o.get("status")) for o in outcomes if o["kind"].startswith("hangup.")]
    assert hang_ups == [("hangup.attempt", None, None), ("hangup.outcome", True, 200)]


async def test_without_hang_up_suspicious_a_suspicious_gated_call_is_left_alone(
    gate_service: RunningService, platform: Platform, carrier: Carrier, http: aiohttp.ClientSession
) -> None:
    gate = await gated(gate_service, http, forward_url=f"{platform.url}/voice")
    call_sid = sid()
    await post_form(http, gate.url, voice_form(call_sid, StirVerstat="TN-Validation-Passed-A"))
    for _ in range(6):
        barge = {"type": "interruption", "call_id": call_sid, "role": "user"}
        async with http.post(f"{gate_service.base_url}/v1/events", json=barge, headers=gate.account.headers) as r:
            assert r.status == 200
    await settled(gate_service.settings)
    (alert,) = await alerts_of(http, gate, "call.suspicious")
    assert "hung_up" not in alert["data"]
    assert [r for r in carrier.received if call_sid in r[0]] == []


async def test_reject_refuses_the_call_and_ends_the_record(
    gate_service: RunningService, http: aiohttp.ClientSession
) -> None:
    gate = await gated(gate_service, http)
    call_sid = sid()
    # A failed signature on a caller that is the called number itself: 0.82, over the reject threshold.
    form = voice_form(call_sid, NUMBER, StirVerstat="TN-Validation-Failed-A")
    status, _, root = await post_form(http, gate.url, form)
    assert status == 200
    assert verbs(root) == ["Reject"]
    assert root[0].attrib == {"reason": "rejected"}
    record = await call_record(http, gate, call_sid)
    assert (record["state"], record["reason"]) == ("ended", "rejected")


async def challenged(http: aiohttp.ClientSession, gate: Gated, call_sid: str, caller: str) -> tuple[str, str]:
    """A call the score sends to review: the challenge's digit and where the keypress goes."""
    status, _, root = await post_form(http, gate.url, voice_form(call_sid, caller, StirVerstat="TN-Validation-Failed"))
    assert status == 200
    assert verbs(root) == ["Gather"]
    gather = root[0]
    assert (gather.attrib["numDigits"], gather.attrib["timeout"]) == ("1", "6")
    say = gather.find("Say")
    assert say is not None and say.text is not None
    digit = say.text.removeprefix("To be connected, press ").removesuffix(".")
    assert digit.isdigit() and len(digit) == 1
    assert digit not in gather.attrib["action"].removeprefix(gate.url)
    assert gather.attrib["action"].endswith(f"/v1/gate/{gate.token}/challenge")
    return digit, gather.attrib["action"]


async def test_the_right_digit_forwards(
    gate_service: RunningService, platform: Platform, http: aiohttp.ClientSession
) -> None:
    gate = await gated(gate_service, http, forward_url=f"{platform.url}/voice")
    call_sid = sid()
    digit, _ = await challenged(http, gate, call_sid, CALLER)
    async with http.post(f"{gate.url}/challenge", data={**voice_form(call_sid), "Digits": digit}) as r:
        assert r.status == 200
        assert await r.read() == PLATFORM_TWIML
    assert (await call_record(http, gate, call_sid))["state"] == "open"


async def test_a_wrong_digit_rejects_alerts_and_blocks_the_caller(
    gate_service: RunningService, http: aiohttp.ClientSession
) -> None:
    gate = await gated(gate_service, http)
    call_sid = sid()
    # A caller of its own: the failed gate makes its history bad (docs/rules.md, Network evidence).
    caller = "+12125550143"
    digit, _ = await challenged(http, gate, call_sid, caller)
    wrong = str((int(digit) + 1) % 10)
    status, _, root = await post_form(http, f"{gate.url}/challenge", {**voice_form(call_sid, caller), "Digits": wrong})
    assert (status, verbs(root)) == (200, ["Reject"])
    record = await call_record(http, gate, call_sid)
    assert (record["state"], record["reason"]) == ("ended", "gate_fail")
    alerts: list[dict[str, Any]] = []
    started = time.monotonic()
    while not alerts:
        assert time.monotonic() - started < 10, "no caller.rate_exceeded for the failed gate"
        await asyncio.sleep(0.1)
        async with http.get(f"{gate_service.base_url}/v1/alerts", headers=gate.account.headers) as r:
            alerts = [a for a in (await r.json())["data"] if a["type"] == "caller.rate_exceeded"]
    assert alerts[0]["data"]["gate"] == "failed"
    assert (alerts[0]["data"]["caller"], alerts[0]["data"]["number"]) == (caller, NUMBER)
    # The caller's next call meets the block.
    next_sid = sid()
    status, _, root = await post_form(
        http, gate.url, voice_form(next_sid, caller, StirVerstat="TN-Validation-Passed-A")
    )
    assert (status, verbs(root)) == (200, ["Reject"])
    assert "blocked" in (await call_record(http, gate, next_sid))["reasons"]


async def test_no_digit_hangs_up_with_gate_timeout(gate_service: RunningService, http: aiohttp.ClientSession) -> None:
    gate = await gated(gate_service, http)
    call_sid = sid()
    caller = "+12125550144"
    await challenged(http, gate, call_sid, caller)
    status, _, root = await post_form(http, f"{gate.url}/challenge", voice_form(call_sid, caller))
    assert (status, verbs(root)) == (200, ["Hangup"])
    record = await call_record(http, gate, call_sid)
    assert (record["state"], record["reason"]) == ("ended", "gate_timeout")


async def test_carrier_first_then_platform_make_one_record_and_the_status_callback_merges(
    gate_service: RunningService, platform: Platform, http: aiohttp.ClientSession
) -> None:
    gate = await gated(gate_service, http, forward_url=f"{platform.url}/voice")
    call_sid = sid()
    await post_form(http, gate.url, voice_form(call_sid, StirVerstat="TN-Validation-Passed-A"))
    platform_start = platform_report("agent-1", call_sid)
    async with http.post(f"{gate_service.base_url}/v1/events", json=platform_start, headers=gate.account.headers) as r:
        answer = await r.json()
    assert (r.status, answer["call_id"], answer["duplicate"]) == (200, "agent-1", True)
    ended = {"type": "call.ended", "call_id": "agent-1", "reason": "completed", "cost": 0.12}
    async with http.post(f"{gate_service.base_url}/v1/events", json=ended, headers=gate.account.headers) as r:
        assert r.status == 200
    form = {**voice_form(call_sid), "CallStatus": "completed", "CallDuration": "42"}
    status, content_type, root = await post_form(http, f"{gate.url}/status", form)
    assert (status, content_type, verbs(root)) == (200, "application/xml", [])
    record = await call_record(http, gate, call_sid)
    assert (record["state"], record["reason"], record["cost"]) == ("ended", "completed", 0.12)
    assert record["attrs"]["answered_by"] == "human"
    async with http.get(f"{gate_service.base_url}/v1/calls", headers=gate.account.headers) as r:
        assert [c["call_id"] for c in (await r.json())["data"]] == [call_sid]


async def test_platform_first_then_gate_make_one_record_and_the_platforms_end_raises_the_cost(
    gate_service: RunningService, platform: Platform, http: aiohttp.ClientSession
) -> None:
    gate = await gated(gate_service, http, forward_url=f"{platform.url}/voice")
    call_sid = sid()
    platform_start = platform_report("agent-2", call_sid)
    async with http.post(f"{gate_service.base_url}/v1/events", json=platform_start, headers=gate.account.headers) as r:
        assert (r.status, (await r.json())["call_id"]) == (200, "agent-2")
    status, _, root = await post_form(http, gate.url, voice_form(call_sid, StirVerstat="TN-Validation-Passed-A"))
    assert (status, verbs(root)) == (200, ["Connect"])
    form = {**voice_form(call_sid), "CallStatus": "completed", "CallDuration": "42"}
    assert (await post_form(http, f"{gate.url}/status", form))[0] == 200
    breakdown = {"llm": 0.1, "stt": 0.02, "tts": 0.02, "carrier": 0.014, "platform": 0.01}
    ended = {"type": "call.ended", "call_id": "agent-2", "cost": 0.164, "cost_breakdown": breakdown}
    async with http.post(f"{gate_service.base_url}/v1/events", json=ended, headers=gate.account.headers) as r:
        assert (r.status, (await r.json())["duplicate"]) == (200, True)
    record = await call_record(http, gate, call_sid)
    assert (record["call_id"], record["state"], record["reason"], record["duration_s"]) == (
        "agent-2",
        "ended",
        "completed",
        42,
    )
    assert (record["cost"], record["cost_breakdown"]) == (0.164, breakdown)
    assert (record["attrs"]["answered_by"], record["attrs"]["attestation"]) == ("human", "A")
    async with http.get(f"{gate_service.base_url}/v1/calls", headers=gate.account.headers) as r:
        assert [c["call_id"] for c in (await r.json())["data"]] == ["agent-2"]


async def test_a_status_callback_ends_the_record_with_the_carriers_duration(
    gate_service: RunningService, platform: Platform, http: aiohttp.ClientSession
) -> None:
    gate = await gated(gate_service, http, forward_url=f"{platform.url}/voice")
    call_sid = sid()
    await post_form(http, gate.url, voice_form(call_sid, StirVerstat="TN-Validation-Passed-A"))
    form = {**voice_form(call_sid), "CallStatus": "no-answer", "CallDuration": "0"}
    assert (await post_form(http, f"{gate.url}/status", form))[0] == 200
    record = await call_record(http, gate, call_sid)
    assert (record["state"], record["reason"], record["duration_s"]) == ("ended", "no-answer", 0)


async def test_signed_requests_are_checked_with_the_carrier_auth_token(
    gate_service: RunningService, platform: Platform, http: aiohttp.ClientSession
) -> None:
    gate = await gated(gate_service, http, forward_url=f"{platform.url}/voice", carrier_auth_token=AUTH_TOKEN)
    form = voice_form(sid(), StirVerstat="TN-Validation-Passed-A")
    signature = RequestValidator(AUTH_TOKEN).compute_signature(gate.url, form)
    async with http.post(gate.url, data=form, headers={"X-Twilio-Signature": signature}) as r:
        assert (r.status, await r.read()) == (200, PLATFORM_TWIML)
    tampered = {**form, "From": "+12125550199"}
    status, content_type, root = await post_form(http, gate.url, tampered, {"X-Twilio-Signature": signature})
    assert (status, content_type, verbs(root)) == (403, "application/xml", ["Reject"])


async def test_a_bad_token_gets_twiml_not_json(gate_service: RunningService, http: aiohttp.ClientSession) -> None:
    for path in ("", "/challenge", "/status"):
        url = f"{gate_service.base_url}/v1/gate/cs_gate_{'x' * 32}{path}"
        status, content_type, root = await post_form(http, url, voice_form(sid()))
        assert (status, content_type, root.tag, verbs(root)) == (401, "application/xml", "Response", ["Reject"])
