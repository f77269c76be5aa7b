"""A voice platform's own webhooks at the edge (decisions section 16): `POST /v1/ingest/<platform>/<token>`,
signed by the platform with the integration's sealed secret, and `POST /v1/ingest/<platform>` with a full
key for a payload forwarded as it came.

Each test runs an edge of its own (`init_app` on a `MemoryLog`, whose worker is the pure folds) with a
deployment key, so an integration's secret is stored sealed as `callscreen integration set` stores it and
the route must open it. `CountingLog` remembers every event the edge appended for an answer: "nothing
appended" is an empty list there (the memory log folds an event when it is asked, so it keeps no record
of it in `records`). The payloads are the adapter tests' fixtures (tests/unit/adapters/payloads/) with
their times moved to a minute ago, since a live start may be at most 7 days old.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import jwt
import msgspec
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from cryptography.fernet import Fernet
from multidict import MultiDict
from twilio.request_validator import RequestValidator

from callscreen.testing import MemoryLog
from domain import commands, keys
from domain.adapters import PARSERS
from domain.rules import LimitRules, Rules
from domain.times import format_ms, parse_ms
from infra.clock import now_ms
from infra.sealing import PREFIX as SEALED_PREFIX
from infra.sealing import Sealer, sealed
from infra.settings import Settings
from ingest.app import init_app
from ingest.log import LogUnavailable
from ingest.routes_platforms import DELIVERIES
from ingest.service import EDGE
from tests.edge.conftest import EdgeUnderTest
from tests.service import AccountKeys
from tests.unit.adapters.adapter_checks import CANARY, load

DEPLOYMENT_KEY = Fernet.generate_key().decode()
PUBLIC_URL = "https://screen.example.com"
# Long enough for an HS256 key (PyJWT warns of one under 32 bytes).
SECRET = "whsec_5f0c2a9e7b3d4c1a8e6f0b2d4c6a8e0f1b3d5c7a"
OTHER_SECRET = "whsec_0000000000000000000000000000000000000000"
LIVEKIT_KEY = "APIx7Kq2mN9pR4sT"
PLATFORMS = ("vapi", "retell", "twilio", "livekit", "bland", "elevenlabs")
# The fixtures' calls begin at 2025-06-02T09:30:00Z.
FIXTURE_START_MS = 1_748_856_600_000
CALLER = "+16465550123"
NUMBER = "+14155550100"
VAPI_CALL = "7c1f6a52-3a1e-4b7d-9a52-0d3c9e1b2f41"
RETELL_CALL = "Jabr9TXYYJHfvl6Syypi88rdAHYHmcq6"
BLAND_CALL = "c1234567-89ab-cdef-0123-456789abcdef"
ELEVENLABS_CALL = "conv_01jwx3m2a7c4d5e6f7g8h9j0k1"
LIVEKIT_ROOM = "RM_tkGHfLjK8dVc"
TWILIO_CALL = "CA5d3f0b8e2c1a4f6e9b7d0c2a4e6f8b1d"


class CountingLog(MemoryLog):
    """The memory log, remembering each event the edge appended (its key and the event as sent); with
    `takes` set, it refuses every event past that many, as a broker that went away mid-post."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.asked: list[tuple[str, dict[str, Any]]] = []
        self.takes: int | None = None

    async def ask(self, topic: str, key: str, value: bytes, partition: int | None) -> Any:
        if topic == self.settings.topic("events"):
            if self.takes is not None and len(self.asked) >= self.takes:
                raise LogUnavailable("gone mid-post")
            self.asked.append((key, msgspec.json.decode(value)))
        return await super().ask(topic, key, value, partition)


@dataclass
class PlatformEdge(EdgeUnderTest):
    app: web.Application = field(default_factory=web.Application)
    counting: CountingLog | None = None

    async def change(self, change: commands.Change) -> dict[str, Any]:
        """The admin command's record sealed, as `callscreen` seals it before appending it."""
        return await super().change(
            commands.Change(sealed(change.record, lambda: Sealer([DEPLOYMENT_KEY])), change.shown)
        )

    def appended(self, account_id: str) -> list[dict[str, Any]]:
        """The events appended for the account, in order."""
        assert self.counting is not None
        return [event for key, event in self.counting.asked if keys.split_call(key)[0] == account_id]

    async def integrate(self, account: AccountKeys, platform: str, secret: str = SECRET) -> None:
        made = self.accounts.accounts[account.account_id]
        key = LIVEKIT_KEY if platform == "livekit" else ""
        shown = await self.change(commands.set_integration(made, platform, secret, key))
        assert shown == {"platform": platform, "configured": True}


@asynccontextmanager
async def serving(settings: Settings) -> AsyncIterator[PlatformEdge]:
    log = CountingLog(settings)
    app = init_app(settings, log)
    server = TestServer(app)
    await server.start_server()
    try:
        base_url = str(server.make_url("")).rstrip("/")
        yield PlatformEdge(base_url, log, settings, app[EDGE].accounts, app, log)
    finally:
        await server.close()


@pytest.fixture
async def edge() -> AsyncIterator[PlatformEdge]:
    """This module's edge (conftest's `account` is made on it): a deployment key, no public URL."""
    async with serving(Settings(secret_key=DEPLOYMENT_KEY)) as running:
        yield running


@pytest.fixture
async def public_edge() -> AsyncIterator[PlatformEdge]:
    """An edge behind a proxy: Twilio signs `CALLSCREEN_PUBLIC_URL` + path, not the URL the edge received."""
    async with serving(Settings(secret_key=DEPLOYMENT_KEY, public_url=PUBLIC_URL)) as running:
        yield running


@pytest.fixture
async def twin() -> AsyncIterator[PlatformEdge]:
    """A second, untouched edge: what `POST /v1/events` answers the same bodies there."""
    async with serving(Settings(secret_key=DEPLOYMENT_KEY)) as running:
        yield running


# --- The platforms' payloads, their times moved to now ---------------------------------------------------


def call_start_ms() -> int:
    """A whole second a minute ago: the fixture call's start moved near now (its end 42 s later)."""
    return (now_ms() - 60_000) // 1000 * 1000


def moved(value: str, delta_ms: int) -> str:
    at = parse_ms(value)
    assert at is not None, value
    return format_ms(at + delta_ms)


def vapi_payload(start: int) -> Any:
    payload = load("vapi_status_update")
    payload["message"]["timestamp"] = start + 250
    return payload


def retell_payload(start: int) -> Any:
    payload = load("retell_call_ended")
    payload["call"].update(start_timestamp=start, end_timestamp=start + 42_500)
    return payload


def bland_payload(start: int) -> Any:
    payload = load("bland_post_call")
    delta = start - FIXTURE_START_MS
    for key in ("created_at", "started_at", "end_at"):
        payload[key] = moved(payload[key], delta)
    for phrase in payload["transcripts"]:
        phrase["created_at"] = moved(phrase["created_at"], delta)
    return payload


def elevenlabs_payload(start: int) -> Any:
    payload = load("elevenlabs_post_call_transcription")
    metadata = payload["data"]["metadata"]
    metadata["start_time_unix_secs"] = metadata["accepted_time_unix_secs"] = start // 1000
    return payload


def livekit_payload(start: int) -> Any:
    payload = load("livekit_participant_joined_sip_inbound")
    participant = payload["participant"]
    participant.update(joinedAt=str(start // 1000), joinedAtMs=str(start + 180))
    payload["createdAt"] = str(start // 1000)
    return payload


def twilio_payload(start: int) -> dict[str, str]:
    # A voice webhook carries no time: the receipt time stands.
    form: dict[str, str] = load("twilio_voice_inbound")
    return form


PAYLOADS: dict[str, Callable[[int], Any]] = {
    "vapi": vapi_payload,
    "retell": retell_payload,
    "twilio": twilio_payload,
    "livekit": livekit_payload,
    "bland": bland_payload,
    "elevenlabs": elevenlabs_payload,
}


def encoded(platform: str, payload: Any) -> bytes:
    """The request body as the platform sends it: Twilio's form, every other platform's JSON."""
    return urlencode(payload).encode() if platform == "twilio" else orjson.dumps(payload)


# --- The platforms' signatures, made as each platform's SDK makes them ----------------------------------


def hex_hmac(secret: str, message: bytes) -> str:
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def sign_vapi(body: bytes, form: Any, url: str, secret: str, now_s: float) -> dict[str, str]:
    stamp = str(int(now_s * 1000))
    return {"x-timestamp": stamp, "x-signature": hex_hmac(secret, f"{stamp}.".encode() + body)}


def sign_retell(body: bytes, form: Any, url: str, secret: str, now_s: float) -> dict[str, str]:
    stamp = str(int(now_s * 1000))
    return {"x-retell-signature": f"v={stamp},d={hex_hmac(secret, body + stamp.encode())}"}


def sign_twilio(body: bytes, form: Any, url: str, secret: str, now_s: float) -> dict[str, str]:
    return {"X-Twilio-Signature": RequestValidator(secret).compute_signature(url, dict(form))}


def sign_livekit(body: bytes, form: Any, url: str, secret: str, now_s: float) -> dict[str, str]:
    digest = base64.b64encode(hashlib.sha256(body).digest()).decode()
    claims = {"iss": LIVEKIT_KEY, "sha256": digest, "nbf": int(now_s) - 5, "exp": int(now_s) + 600}
    return {"Authorization": jwt.encode(claims, secret, algorithm="HS256")}


def sign_bland(body: bytes, form: Any, url: str, secret: str, now_s: float) -> dict[str, str]:
    return {"X-Webhook-Signature": hex_hmac(secret, body)}


def sign_elevenlabs(body: bytes, form: Any, url: str, secret: str, now_s: float) -> dict[str, str]:
    stamp = str(int(now_s))
    return {"ElevenLabs-Signature": f"t={stamp},v0={hex_hmac(secret, f'{stamp}.'.encode() + body)}"}


Signer = Callable[[bytes, Any, str, str, float], dict[str, str]]
SIGNERS: dict[str, Signer] = {
    "vapi": sign_vapi,
    "retell": sign_retell,
    "twilio": sign_twilio,
    "livekit": sign_livekit,
    "bland": sign_bland,
    "elevenlabs": sign_elevenlabs,
}


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any


async def post(
    http: aiohttp.ClientSession, url: str, platform: str, body: bytes, headers: Mapping[str, str] | None = None
) -> Answer:
    kind = "application/x-www-form-urlencoded" if platform == "twilio" else "application/json"
    async with http.post(url, data=body, headers={"Content-Type": kind, **(headers or {})}) as r:
        assert r.content_type == "application/json"
        return Answer(r.status, await r.json())


def token_url(edge: PlatformEdge, account: AccountKeys, platform: str) -> str:
    return f"{edge.base_url}/v1/ingest/{platform}/{account.ingest_token}"


async def post_signed(
    http: aiohttp.ClientSession,
    edge: PlatformEdge,
    account: AccountKeys,
    platform: str,
    payload: Any,
    *,
    secret: str = SECRET,
    signed_url: str | None = None,
    now_s: float | None = None,
) -> Answer:
    """The payload posted to the token path as the platform posts it, signed with `secret`."""
    url = token_url(edge, account, platform)
    body = encoded(platform, payload)
    signer = SIGNERS[platform]
    headers = signer(body, payload, signed_url or url, secret, time.time() if now_s is None else now_s)
    return await post(http, url, platform, body, headers)


# --- What the worker answers each event (POST /v1/events' bodies) ----------------------------------------


def decision(call_id: str, score: float = 0.0, reasons: tuple[str, ...] = ()) -> dict[str, Any]:
    """A first call from a caller nobody knows: allowed, nothing (or only `reasons`) against it."""
    return {
        "call_id": call_id,
        "score": score,
        "action": "allow",
        "thresholds": {"review": 0.5, "reject": 0.8},
        "reasons": list(reasons),
        "block": None,
        "checks": {
            "caller_calls_10m": 1,
            "network_calls": 0,
            "network_accounts": 0,
            "network_bad_accounts": 0,
            "network_good_accounts": 0,
            "network_bad_token_accounts": 0,
            "network_good_token_accounts": 0,
        },
        "prior": {"points": 0, "calls": 0, "good": 0, "last": None},
    }


def live(user: int, agent: int, interruptions: int = 0) -> dict[str, Any]:
    """A turn's answer: the call's live flags and counts so far."""
    return {
        "flags": [],
        "score": 0.0,
        "spam_score": 0,
        "user_turns": user,
        "agent_turns": agent,
        "interruptions": interruptions,
    }


def ended(call_id: str, duration_s: int, spam_score: int = 0) -> dict[str, Any]:
    return {"call_id": call_id, "duration_s": duration_s, "spam_score": spam_score}


# Twilio's form says STIR/SHAKEN attestation B (`StirVerstat`), which the gate's attrs translation carries.
TWILIO_DECISION = decision(TWILIO_CALL, 0.25, ("attestation_b",))
RETELL_ANSWERS = [
    decision(RETELL_CALL),
    # The agent's greeting (utterance 0) starts and ends, then the caller's (1); the agent's (2) starts,
    # the caller's (3) starts over it, and both end.
    live(0, 1),
    live(0, 1),
    live(1, 1),
    live(1, 1),
    live(1, 2),
    live(2, 2),
    live(2, 2),
    live(2, 2),
    ended(RETELL_CALL, 42),
]
# The same post again: the same records (their ids come from the delivery's bytes), each answered as the
# record stands, a turn's with the call's two turns each; nothing is counted again.
RETELL_RETRY_ANSWERS = [decision(RETELL_CALL), *[live(2, 2)] * 8, ended(RETELL_CALL, 42)]


# --- Which platform and which path ------------------------------------------------------------------------


@pytest.mark.parametrize("platform", ["zoom", "VAPI", "twilio-voice"])
async def test_an_unknown_platform_is_404_on_both_paths(
    http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys, platform: str
) -> None:
    body = orjson.dumps({"message": {"type": "status-update"}})
    for url, headers in (
        (f"{edge.base_url}/v1/ingest/{platform}/{account.ingest_token}", {}),
        (f"{edge.base_url}/v1/ingest/{platform}", account.headers),
    ):
        answer = await post(http, url, "vapi", body, headers)
        assert (answer.status, answer.body) == (404, {"error": "unknown_platform", "platform": platform}), url
    assert edge.appended(account.account_id) == []


@pytest.mark.parametrize("token", ["cs_ing_" + "B" * 32, "whatever"])
async def test_an_unknown_ingest_token_is_invalid_token(
    http: aiohttp.ClientSession, edge: PlatformEdge, token: str
) -> None:
    payload = vapi_payload(call_start_ms())
    body = encoded("vapi", payload)
    url = f"{edge.base_url}/v1/ingest/vapi/{token}"
    answer = await post(http, url, "vapi", body, sign_vapi(body, payload, url, SECRET, time.time()))
    assert (answer.status, answer.body) == (401, {"error": "invalid_token"})


async def test_a_platform_with_no_integration_is_409_on_the_token_path(
    http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys
) -> None:
    # Another platform's integration does not count for this one.
    await edge.integrate(account, "retell")
    answer = await post_signed(http, edge, account, "vapi", vapi_payload(call_start_ms()))
    assert (answer.status, answer.body) == (409, {"error": "integration_not_configured", "platform": "vapi"})
    assert edge.appended(account.account_id) == []


async def test_a_removed_integration_is_409_again(
    http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys
) -> None:
    await edge.integrate(account, "bland")
    made = edge.accounts.accounts[account.account_id]
    shown = await edge.change(commands.remove_integration(made, "bland"))
    assert shown == {"platform": "bland", "configured": False}
    answer = await post_signed(http, edge, account, "bland", bland_payload(call_start_ms()))
    assert (answer.status, answer.body) == (409, {"error": "integration_not_configured", "platform": "bland"})
    assert edge.appended(account.account_id) == []


async def test_the_integration_secret_is_stored_sealed(edge: PlatformEdge, account: AccountKeys) -> None:
    await edge.integrate(account, "livekit")
    [record] = [
        r
        for topic, _, r in edge.log.records
        if topic == edge.settings.topic("accounts") and r["kind"] == "integration.set"
    ]
    assert record["integration_secret"].startswith(SEALED_PREFIX)
    assert SECRET not in orjson.dumps(record).decode()
    assert record["integration_key"] == LIVEKIT_KEY
    stored = edge.accounts.accounts[account.account_id].integrations["livekit"]
    assert (stored.secret.startswith(SEALED_PREFIX), stored.key) == (True, LIVEKIT_KEY)


# --- Signatures -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("platform", PLATFORMS)
async def test_a_correct_signature_appends_the_mapped_events_and_lists_their_answers(
    http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys, platform: str
) -> None:
    await edge.integrate(account, platform)
    payload = PAYLOADS[platform](call_start_ms())
    answer = await post_signed(http, edge, account, platform, payload)
    expected = {
        "vapi": [decision(VAPI_CALL)],
        "retell": RETELL_ANSWERS,
        "twilio": [TWILIO_DECISION],
        "livekit": [decision(LIVEKIT_ROOM)],
        "bland": [decision(BLAND_CALL), live(0, 1), live(1, 1), live(1, 2), live(2, 2), ended(BLAND_CALL, 42)],
        # The agent's second message (transcript entry 3) was cut off by the caller: an interruption.
        "elevenlabs": [
            decision(ELEVENLABS_CALL),
            live(0, 1),
            live(1, 1),
            live(1, 2, interruptions=1),
            live(2, 2, interruptions=1),
            ended(ELEVENLABS_CALL, 42),
        ],
    }[platform]
    assert (answer.status, answer.body) == (200, {"events": expected})
    # What was appended is the parser's bodies, in its order, under the call's key, `source` the platform.
    bodies = PARSERS[platform](payload)
    assert isinstance(bodies, list)
    appended = edge.appended(account.account_id)
    assert [(e["type"], e["call_id"]) for e in appended] == [(b["type"], b["call_id"]) for b in bodies]
    # Backfilled turns keep their numbers (a retry is then a duplicate); their text was measured and dropped.
    assert [e.get("turn") for e in appended] == [b.get("turn") for b in bodies]
    assert CANARY.encode() not in orjson.dumps(appended)
    assert edge.counting is not None
    assert {key for key, _ in edge.counting.asked} == {keys.call(account.account_id, bodies[0]["call_id"])}
    assert all(e["source"] == platform for e in appended if e["type"] in ("call.started", "call.ended"))
    last = edge.app[DELIVERIES].last(account.account_id, platform)
    assert last is not None and (last.status, last.outcome) == (200, f"{len(expected)} events")


@pytest.mark.parametrize("platform", PLATFORMS)
async def test_each_answer_is_what_post_v1_events_answers_the_same_body(
    http: aiohttp.ClientSession, edge: PlatformEdge, twin: PlatformEdge, account: AccountKeys, platform: str
) -> None:
    await edge.integrate(account, platform)
    payload = PAYLOADS[platform](call_start_ms())
    answer = await post_signed(http, edge, account, platform, payload)
    other = await twin.new_account("guard")
    bodies = PARSERS[platform](payload)
    assert isinstance(bodies, list)
    direct = []
    for body in bodies:
        async with http.post(f"{twin.base_url}/v1/events", json=body, headers=other.headers) as r:
            assert r.status == 200
            direct.append(await r.json())
    assert (answer.status, answer.body) == (200, {"events": direct})


async def test_the_same_delivery_twice_changes_nothing(
    http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys
) -> None:
    await edge.integrate(account, "retell")
    payload = retell_payload(call_start_ms())
    first = await post_signed(http, edge, account, "retell", payload)
    retry = await post_signed(http, edge, account, "retell", payload)
    assert (first.status, first.body) == (200, {"events": RETELL_ANSWERS})
    # The retry's records are the first delivery's, which the fold has seen.
    assert (retry.status, retry.body) == (200, {"events": RETELL_RETRY_ANSWERS})


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("how", ["none", "other_secret", "tampered"])
async def test_a_missing_or_wrong_signature_is_401_and_appends_nothing(
    http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys, platform: str, how: str
) -> None:
    await edge.integrate(account, platform)
    payload = PAYLOADS[platform](call_start_ms())
    url = token_url(edge, account, platform)
    body = encoded(platform, payload)
    headers = SIGNERS[platform](body, payload, url, OTHER_SECRET if how == "other_secret" else SECRET, time.time())
    if how == "none":
        headers = {}
    elif how == "tampered":
        # Signed, then changed on the way: another caller.
        body = body.replace(urlencode({"From": CALLER}).encode(), b"From=%2B12125550199").replace(
            CALLER.encode(), b"+12125550199"
        )
        assert b"%2B12125550199" in body or b"+12125550199" in body
    answer = await post(http, url, platform, body, headers)
    assert (answer.status, answer.body) == (401, {"error": "invalid_signature"})
    assert edge.appended(account.account_id) == []
    assert edge.log.harness.calls == {}
    last = edge.app[DELIVERIES].last(account.account_id, platform)
    assert last is not None and (last.status, last.outcome) == (401, "invalid_signature")


@pytest.mark.parametrize(
    ("platform", "age_s"),
    # Vapi's timestamp either side of its 300 s; LiveKit's JWT (valid 600 s from signing) expired 30 s ago.
    [("vapi", 301), ("vapi", -301), ("retell", 301), ("retell", -301), ("elevenlabs", 1801), ("livekit", 630)],
)
async def test_a_signature_past_its_freshness_is_401(
    http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys, platform: str, age_s: int
) -> None:
    await edge.integrate(account, platform)
    payload = PAYLOADS[platform](call_start_ms())
    answer = await post_signed(http, edge, account, platform, payload, now_s=time.time() - age_s)
    assert (answer.status, answer.body) == (401, {"error": "invalid_signature"})
    assert edge.appended(account.account_id) == []


@pytest.mark.parametrize(("platform", "age_s"), [("vapi", 240), ("retell", 240), ("elevenlabs", 1700)])
async def test_a_signature_within_its_freshness_is_taken(
    http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys, platform: str, age_s: int
) -> None:
    await edge.integrate(account, platform)
    payload = PAYLOADS[platform](call_start_ms())
    answer = await post_signed(http, edge, account, platform, payload, now_s=time.time() - age_s)
    bodies = PARSERS[platform](payload)
    assert isinstance(bodies, list)
    assert (answer.status, len(answer.body["events"])) == (200, len(bodies))


async def test_vapi_signs_with_a_timestamp_in_seconds_too(
    http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys
) -> None:
    await edge.integrate(account, "vapi")
    payload = vapi_payload(call_start_ms())
    body = encoded("vapi", payload)
    stamp = str(int(time.time()))
    headers = {"x-timestamp": stamp, "x-signature": hex_hmac(SECRET, f"{stamp}.".encode() + body)}
    answer = await post(http, token_url(edge, account, "vapi"), "vapi", body, headers)
    assert (answer.status, answer.body) == (200, {"events": [decision(VAPI_CALL)]})


@pytest.mark.parametrize(("given", "status"), [(SECRET, 200), (OTHER_SECRET, 401), ("", 401)])
async def test_vapis_legacy_secret_header_must_equal_the_secret(
    http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys, given: str, status: int
) -> None:
    await edge.integrate(account, "vapi")
    body = encoded("vapi", vapi_payload(call_start_ms()))
    answer = await post(http, token_url(edge, account, "vapi"), "vapi", body, {"x-vapi-secret": given})
    assert answer.status == status
    assert answer.body == ({"events": [decision(VAPI_CALL)]} if status == 200 else {"error": "invalid_signature"})


async def test_a_livekit_token_of_another_api_key_is_refused(
    http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys
) -> None:
    await edge.integrate(account, "livekit")
    payload = livekit_payload(call_start_ms())
    body = encoded("livekit", payload)
    digest = base64.b64encode(hashlib.sha256(body).digest()).decode()
    now = int(time.time())
    for claims in (
        {"iss": "APIsomebodyElse", "sha256": digest, "exp": now + 600},
        {"sha256": digest, "exp": now + 600},
        # The right issuer, but the hash of another body.
        {"iss": LIVEKIT_KEY, "sha256": base64.b64encode(hashlib.sha256(b"{}").digest()).decode(), "exp": now + 600},
    ):
        token = jwt.encode(claims, SECRET, algorithm="HS256")
        answer = await post(http, token_url(edge, account, "livekit"), "livekit", body, {"Authorization": token})
        assert (answer.status, answer.body) == (401, {"error": "invalid_signature"}), claims
    # `Bearer ` before the token is taken as LiveKit's SDK takes it.
    headers = sign_livekit(body, payload, "", SECRET, time.time())
    answer = await post(
        http,
        token_url(edge, account, "livekit"),
        "livekit",
        body,
        {"Authorization": f"Bearer {headers['Authorization']}"},
    )
    assert (answer.status, answer.body) == (200, {"events": [decision(LIVEKIT_ROOM)]})
    assert len(edge.appended(account.account_id)) == 1


async def test_twilio_signs_the_request_url_without_a_public_url(
    http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys
) -> None:
    await edge.integrate(account, "twilio")
    form = twilio_payload(call_start_ms())
    # The public URL is not this edge's: a signature over it is refused.
    wrong = await post_signed(
        http, edge, account, "twilio", form, signed_url=f"{PUBLIC_URL}/v1/ingest/twilio/{account.ingest_token}"
    )
    assert (wrong.status, wrong.body) == (401, {"error": "invalid_signature"})
    answer = await post_signed(http, edge, account, "twilio", form)
    assert (answer.status, answer.body) == (200, {"events": [TWILIO_DECISION]})


async def test_twilio_signs_the_public_url_plus_the_path_when_one_is_set(
    http: aiohttp.ClientSession, public_edge: PlatformEdge
) -> None:
    account = await public_edge.new_account()
    await public_edge.integrate(account, "twilio")
    form = twilio_payload(call_start_ms())
    # What the edge received is not what Twilio called.
    wrong = await post_signed(http, public_edge, account, "twilio", form)
    assert (wrong.status, wrong.body) == (401, {"error": "invalid_signature"})
    assert public_edge.appended(account.account_id) == []
    public = f"{PUBLIC_URL}/v1/ingest/twilio/{account.ingest_token}"
    answer = await post_signed(http, public_edge, account, "twilio", form, signed_url=public)
    assert (answer.status, answer.body) == (200, {"events": [TWILIO_DECISION]})


async def test_a_twilio_form_with_a_repeated_name_is_checked_over_every_value(
    http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys
) -> None:
    await edge.integrate(account, "twilio")
    pairs = [*twilio_payload(call_start_ms()).items(), ("SipHeader_X-Tag", "a"), ("SipHeader_X-Tag", "b")]
    url = token_url(edge, account, "twilio")
    # The Twilio SDK signs every value of a repeated name (its validator reads a multidict's `getall`).
    signature = RequestValidator(SECRET).compute_signature(url, MultiDict(pairs))
    answer = await post(http, url, "twilio", urlencode(pairs).encode(), {"X-Twilio-Signature": signature})
    assert (answer.status, answer.body) == (200, {"events": [TWILIO_DECISION]})


async def test_twilios_status_callback_ends_the_call_with_its_duration(
    http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys
) -> None:
    await edge.integrate(account, "twilio")
    started = await post_signed(http, edge, account, "twilio", twilio_payload(call_start_ms()))
    assert started.status == 200
    completed: dict[str, str] = load("twilio_status_completed")
    # Twilio's Timestamp (RFC 2822), after the start's receipt; CallDuration says how long it ran, and
    # attestation B's 0.25 settles as the call's spam_score.
    completed["Timestamp"] = time.strftime("%a, %d %b %Y %H:%M:%S +0000", time.gmtime(time.time() + 1))
    answer = await post_signed(http, edge, account, "twilio", completed)
    assert (answer.status, answer.body) == (200, {"events": [ended(TWILIO_CALL, 42, spam_score=25)]})
    # A retry (Twilio signs no time): the same bytes, so the same record, answered as it stands.
    retry = await post_signed(http, edge, account, "twilio", completed)
    assert (retry.status, retry.body) == (200, {"events": [ended(TWILIO_CALL, 42, spam_score=25)]})
    end = edge.appended(account.account_id)[1]
    assert (end["type"], end["source"], end["duration_s"], end["provider_call_id"]) == (
        "call.ended",
        "twilio",
        42,
        TWILIO_CALL,
    )


# --- Bodies -----------------------------------------------------------------------------------------------


async def test_a_retell_end_that_is_malformed_refuses_the_whole_post(
    http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys
) -> None:
    await edge.integrate(account, "retell")
    payload = retell_payload(call_start_ms())
    # The start and every turn would be valid; the end is not.
    payload["call"]["end_timestamp"] = "soon"
    answer = await post_signed(http, edge, account, "retell", payload)
    assert (answer.status, answer.body) == (400, {"error": "invalid_payload", "field": "call.end_timestamp"})
    assert edge.appended(account.account_id) == []
    last = edge.app[DELIVERIES].last(account.account_id, "retell")
    assert last is not None and (last.status, last.outcome) == (400, "invalid_payload")


@pytest.mark.parametrize(
    ("platform", "spoil", "field"),
    [
        ("vapi", lambda p: p["message"]["call"].pop("id"), "message.call.id"),
        ("retell", lambda p: p["call"].pop("from_number"), "call.from_number"),
        # A word's time that is not a number: the turns are read before the end, and named by their place.
        (
            "retell",
            lambda p: p["call"]["transcript_object"][2]["words"][0].update(start="x"),
            "call.transcript_object[2].words.start",
        ),
        ("bland", lambda p: p.pop("to"), "to"),
        ("bland", lambda p: p["transcripts"][4].pop("created_at"), "transcripts[4].created_at"),
        ("elevenlabs", lambda p: p["data"].pop("conversation_id"), "data.conversation_id"),
        ("livekit", lambda p: p["room"].pop("sid"), "room.sid"),
        ("twilio", lambda p: p.pop("From"), "From"),
        ("twilio", lambda p: p.pop("CallSid"), "CallSid"),
    ],
)
async def test_a_payload_missing_a_required_field_is_400_naming_it(
    http: aiohttp.ClientSession,
    edge: PlatformEdge,
    account: AccountKeys,
    platform: str,
    spoil: Callable[[Any], object],
    field: str,
) -> None:
    await edge.integrate(account, platform)
    payload = PAYLOADS[platform](call_start_ms())
    spoil(payload)
    answer = await post_signed(http, edge, account, platform, payload)
    assert (answer.status, answer.body) == (400, {"error": "invalid_payload", "field": field})
    assert edge.appended(account.account_id) == []


async def test_an_event_validation_refuses_is_refused_before_any_is_appended(
    http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys
) -> None:
    """The parser's bodies are each validated as `POST /v1/events` validates it before the first append:
    a Bland post whose start and turns are valid but whose price is past the cost cap writes nothing."""
    await edge.integrate(account, "bland")
    payload = bland_payload(call_start_ms())
    payload["price"] = 5000
    answer = await post_signed(http, edge, account, "bland", payload)
    assert answer.status == 400
    assert answer.body["error"] == "invalid_field" and answer.body["field"] == "cost"
    assert edge.appended(account.account_id) == []


@pytest.mark.parametrize("body", [b"{nope", b"", b"\xff\xfe"])
async def test_a_signed_body_that_is_not_json_is_invalid_json(
    http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys, body: bytes
) -> None:
    await edge.integrate(account, "bland")
    url = token_url(edge, account, "bland")
    answer = await post(http, url, "bland", body, sign_bland(body, None, url, SECRET, time.time()))
    assert (answer.status, answer.body) == (400, {"error": "invalid_json"})
    # Unsigned, the same body is refused for its signature first: nothing is parsed before it is checked.
    answer = await post(http, url, "bland", body, {})
    assert (answer.status, answer.body) == (401, {"error": "invalid_signature"})
    assert edge.appended(account.account_id) == []


@pytest.mark.parametrize(
    ("platform", "payload"),
    [
        ("vapi", {"message": {"type": "tool-calls", "toolCallList": [], "call": {"id": VAPI_CALL}}}),
        ("vapi", {"message": {"type": "status-update", "status": "ringing", "call": {"id": VAPI_CALL}}}),
        ("retell", load("retell_call_analyzed")),
        ("bland", load("bland_event_stream")),
        ("elevenlabs", load("elevenlabs_post_call_audio")),
        ("livekit", load("livekit_participant_joined_agent")),
        ("twilio", load("twilio_status_initiated")),
    ],
)
async def test_what_maps_to_no_event_is_ignored(
    http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys, platform: str, payload: Any
) -> None:
    await edge.integrate(account, platform)
    answer = await post_signed(http, edge, account, platform, payload)
    assert (answer.status, answer.body) == (200, {"ignored": True, "why": "not_a_call_event"})
    assert edge.appended(account.account_id) == []
    last = edge.app[DELIVERIES].last(account.account_id, platform)
    assert last is not None and (last.status, last.outcome) == (200, "ignored")


# --- The forwarding path ----------------------------------------------------------------------------------


async def test_a_full_key_forwards_a_payload_without_a_signature_or_an_integration(
    http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys
) -> None:
    url = f"{edge.base_url}/v1/ingest/retell"
    body = encoded("retell", retell_payload(call_start_ms()))
    answer = await post(http, url, "retell", body, account.headers)
    assert (answer.status, answer.body) == (200, {"events": RETELL_ANSWERS})
    assert len(edge.appended(account.account_id)) == len(RETELL_ANSWERS)
    # X-Service-Key is a full key too; the same post again is all duplicates.
    answer = await post(http, url, "retell", body, {"X-Service-Key": account.key})
    assert (answer.status, answer.body) == (200, {"events": RETELL_RETRY_ANSWERS})


async def test_a_forwarded_twilio_form_is_taken_as_a_form(
    http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys
) -> None:
    body = encoded("twilio", twilio_payload(call_start_ms()))
    answer = await post(http, f"{edge.base_url}/v1/ingest/twilio", "twilio", body, account.headers)
    assert (answer.status, answer.body) == (200, {"events": [TWILIO_DECISION]})


async def test_a_read_key_cannot_forward(http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys) -> None:
    read = await edge.change(commands.create_key(edge.accounts.accounts[account.account_id], "read", "dashboard"))
    body = encoded("vapi", vapi_payload(call_start_ms()))
    answer = await post(
        http, f"{edge.base_url}/v1/ingest/vapi", "vapi", body, {"Authorization": f"Bearer {read['key']}"}
    )
    assert (answer.status, answer.body) == (403, {"error": "read_only_key"})
    assert edge.appended(account.account_id) == []


async def test_forwarding_needs_a_key(http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys) -> None:
    url = f"{edge.base_url}/v1/ingest/vapi"
    body = encoded("vapi", vapi_payload(call_start_ms()))
    answer = await post(http, url, "vapi", body)
    assert (answer.status, answer.body) == (401, {"error": "missing_key"})
    # Nor is the ingest token a key, nor does a platform signature stand in for one.
    for headers in (
        {"Authorization": f"Bearer {account.ingest_token}"},
        {"Authorization": "Bearer cs_live_" + "A" * 32},
    ):
        answer = await post(http, url, "vapi", body, headers)
        assert (answer.status, answer.body) == (401, {"error": "invalid_key"})
    answer = await post(http, url, "vapi", body, sign_vapi(body, None, url, SECRET, time.time()))
    assert (answer.status, answer.body) == (401, {"error": "missing_key"})
    assert edge.appended(account.account_id) == []


async def test_a_forwarded_body_that_is_not_json_is_invalid_json(
    http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys
) -> None:
    answer = await post(http, f"{edge.base_url}/v1/ingest/vapi", "vapi", b"{nope", account.headers)
    assert (answer.status, answer.body) == (400, {"error": "invalid_json"})
    answer = await post(http, f"{edge.base_url}/v1/ingest/vapi", "vapi", b"[]", account.headers)
    assert (answer.status, answer.body) == (400, {"error": "invalid_payload", "field": "message"})


async def test_a_twilio_body_that_is_not_utf8_is_invalid_body_before_its_signature(
    http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys
) -> None:
    """Twilio's signature covers the form's fields, so the form is read first (docs/api.md, Platform
    webhooks): unsigned or not, a body that is not UTF-8 is 400 `invalid_body`."""
    await edge.integrate(account, "twilio")
    answer = await post(http, token_url(edge, account, "twilio"), "twilio", b"CallSid=\xff", {})
    assert (answer.status, answer.body) == (400, {"error": "invalid_body"})
    assert edge.appended(account.account_id) == []


async def test_a_body_over_64_kib_is_413_before_its_signature(
    http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys
) -> None:
    await edge.integrate(account, "bland")
    body = orjson.dumps({**bland_payload(call_start_ms()), "summary": "y" * 70_000})
    answer = await post(http, token_url(edge, account, "bland"), "bland", body, {})
    assert (answer.status, answer.body) == (413, {"error": "body_too_large", "limit": 65536})
    assert edge.appended(account.account_id) == []


async def test_an_end_the_worker_refuses_is_listed_as_its_error(
    http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys
) -> None:
    """Vapi's end-of-call report of a call whose start never came: appended, and the worker's refusal
    listed as `POST /v1/events` gives it."""
    await edge.integrate(account, "vapi")
    report = load("vapi_end_of_call_report")
    report["message"]["endedAt"] = format_ms(now_ms() - 1000)
    answer = await post_signed(http, edge, account, "vapi", report)
    assert (answer.status, answer.body) == (200, {"events": [{"error": "unknown_call"}]})
    assert [e["type"] for e in edge.appended(account.account_id)] == ["call.ended"]


async def test_a_retry_after_a_partial_append_counts_no_turn_twice(
    http: aiohttp.ClientSession, edge: PlatformEdge, account: AccountKeys
) -> None:
    await edge.integrate(account, "retell")
    payload = retell_payload(call_start_ms())
    assert edge.counting is not None
    # The log takes the start and the first two utterances' turns, then goes away.
    edge.counting.takes = 5
    broken = await post_signed(http, edge, account, "retell", payload)
    assert (broken.status, broken.body) == (503, {"error": "unavailable"})
    assert len(edge.appended(account.account_id)) == 5
    edge.counting.takes = None
    retry = await post_signed(http, edge, account, "retell", payload)
    # What was appended is the same records again, the rest folds on as one delivery would have.
    assert (retry.status, retry.body) == (
        200,
        {"events": [decision(RETELL_CALL), *[live(1, 1)] * 4, *RETELL_ANSWERS[5:]]},
    )


@pytest.mark.parametrize("deployment_key", ["", Fernet.generate_key().decode()], ids=["no_key", "another_key"])
async def test_a_secret_the_edge_cannot_open_is_503(
    http: aiohttp.ClientSession, tmp_path: Path, deployment_key: str
) -> None:
    """No deployment key, or another one than sealed the secret: the signature cannot be checked."""
    async with serving(Settings(data_dir=str(tmp_path), secret_key=deployment_key)) as keyless:
        account = await keyless.new_account()
        await keyless.integrate(account, "bland")
        answer = await post_signed(http, keyless, account, "bland", bland_payload(call_start_ms()))
        assert (answer.status, answer.body) == (503, {"error": "unavailable"})
        assert keyless.appended(account.account_id) == []


async def test_a_delivery_counts_once_in_the_event_limit_and_before_its_signature(
    http: aiohttp.ClientSession,
) -> None:
    """Two posts a minute: two whole Retell calls (ten events each) are taken, and a third post is 429
    before its signature is looked at (it has none)."""
    rules = Rules(limits=LimitRules(events_per_minute=2))
    async with serving(Settings(secret_key=DEPLOYMENT_KEY, rules=rules)) as limited:
        account = await limited.new_account()
        await limited.integrate(account, "retell")
        for call_id in ("first", "second"):
            payload = retell_payload(call_start_ms())
            payload["call"]["call_id"] = call_id
            answer = await post_signed(http, limited, account, "retell", payload)
            assert (answer.status, len(answer.body["events"])) == (200, 10)
        body = encoded("retell", retell_payload(call_start_ms()))
        answer = await post(http, token_url(limited, account, "retell"), "retell", body, {})
        assert answer.status == 429
        assert answer.body == {"error": "rate_limited", "limit": 2, "window_s": 60}
        assert len(limited.appended(account.account_id)) == 20
