"""A voice platform's own webhooks through the real pipeline (docs/decisions.md, section 16): each platform's
native payloads (tests/unit/adapters/payloads) posted as the platform posts them, signed by its own scheme
with the integration's secret, and what comes out: the call record, refusals that write nothing, retries
that change nothing, messages that map to nothing, a canary word that reaches nothing, and a gated call
folded with its platform's report.

One walk for the module (the `walked` fixture) does every post on the session's service, then the tests
read what it saw, so the file pays for one settle and one scan of the topics and files.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import hashlib
import hmac
import json
import random
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import jwt
import pytest
from twilio.request_validator import RequestValidator

from callscreen.admin import Admin
from infra.clock import now_ms
from tests.service import AccountKeys, RunningService, create_account, settled
from tests.test_gate import NUMBER, Gated, gated, post_form, sid, voice_form
from tests.topics import read_topic, topic_names

pytestmark = pytest.mark.pipeline

PAYLOADS = Path(__file__).parent / "unit" / "adapters" / "payloads"
PLATFORMS = ("vapi", "retell", "twilio", "livekit", "bland", "elevenlabs")
# The stored payloads: their call starts at this moment, the caller is this number, and this word stands
# in their transcripts, summaries and recording URLs.
PAYLOAD_START_MS = 1748856600000  # 2025-06-02T09:30:00Z
PAYLOAD_CALLER = "+16465550123"
PAYLOAD_WORD = "PELICAN7"
# Times within this of the payloads' start are moved to now (the contract refuses a live start 7 days old).
NEAR_MS = 30 * 24 * 3600 * 1000
# A word of this run's own: no other test's data can hold it.
CANARY = f"PELICAN{random.Random().randrange(10**9):09d}"
# ElevenLabs' audio webhook carries the recording itself, base64-encoded: its words must not leak either.
AUDIO = base64.b64encode(f"the recording says {CANARY}".encode()).decode()
# One caller per platform, each its own account: no call of one platform reads another's history.
CALLERS = {
    "vapi": "+12125550131",
    "retell": "+13105550132",
    "twilio": "+16175550133",
    "livekit": "+17185550134",
    "bland": "+13055550135",
    "elevenlabs": "+13475550136",
}
GATE_CALLERS = ("+19295550137", "+12125550138")
# The Vapi call whose every message is retried at once, on an account of its own.
LIVE_CALLER = "+16175550139"
LIVEKIT_KEY = "APIxK3dQ9vRm2T"
NOT_A_CALL_EVENT = {"ignored": True, "why": "not_a_call_event"}
SIGNATURE_HEADERS = {
    "vapi": ("x-signature", "x-timestamp"),
    "retell": ("x-retell-signature",),
    "twilio": ("X-Twilio-Signature",),
    "livekit": ("Authorization",),
    "bland": ("X-Webhook-Signature",),
    "elevenlabs": ("ElevenLabs-Signature",),
}


# -- The payloads, made recent ----------------------------------------------------------------------------


def moved(value: Any, shift_ms: int) -> Any:
    """`value` with every time near the payloads' start moved by `shift_ms` (a whole number of seconds):
    epoch seconds, milliseconds and nanoseconds (numbers, or protobuf JSON's digit strings), ISO 8601 and
    RFC 2822 strings, each written back in its own shape."""
    if isinstance(value, dict):
        return {k: moved(v, shift_ms) for k, v in value.items()}
    if isinstance(value, list):
        return [moved(v, shift_ms) for v in value]
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        for per_ms in (0.001, 1, 1_000_000):
            if abs(value - PAYLOAD_START_MS * per_ms) < NEAR_MS * per_ms:
                shifted = value + shift_ms * per_ms
                return round(shifted) if isinstance(value, int) else shifted
        return value
    if isinstance(value, str):
        if value.isdigit():
            again = moved(int(value), shift_ms)
            return str(again)
        return _moved_text(value, shift_ms)
    return value


def _moved_text(value: str, shift_ms: int) -> str:
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        iso = True
    except ValueError:
        try:
            moment = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return value
        iso = False
    if moment.tzinfo is None or abs(moment.timestamp() * 1000 - PAYLOAD_START_MS) >= NEAR_MS:
        return value
    later = moment + timedelta(milliseconds=shift_ms)
    if not iso:
        return format_datetime(later)
    if value.endswith("Z"):
        return later.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return later.isoformat()


@dataclass(frozen=True)
class Payloads:
    """The stored payloads as one platform's account receives them now: recent times, its caller, and this
    run's canary word in place of the stored one."""

    shift_ms: int
    caller: str
    names: dict[str, str] = field(default_factory=dict)

    @property
    def start_ms(self) -> int:
        return PAYLOAD_START_MS + self.shift_ms

    def load(self, name: str) -> Any:
        text = (PAYLOADS / name).read_text().replace(PAYLOAD_WORD, CANARY).replace(PAYLOAD_CALLER, self.caller)
        for old, new in self.names.items():
            text = text.replace(old, new)
        return moved(json.loads(text), self.shift_ms)


def vapi_call(p: Payloads) -> list[Any]:
    """A Vapi call's messages as they come: started, each side's turn (speech updates), the caller's final
    transcript and a cut-in, then the end-of-call report."""
    speech = p.load("vapi_speech_update.json")

    def spoken(role: str, status: str, turn: int, second: float) -> Any:
        message = copy.deepcopy(speech)
        message["message"].update(role=role, status=status, turn=turn, timestamp=p.start_ms + round(second * 1000))
        return message

    return [
        p.load("vapi_status_update.json"),
        spoken("assistant", "started", 0, 0.65),
        spoken("assistant", "stopped", 0, 3.8),
        spoken("user", "started", 1, 4.31),
        spoken("user", "stopped", 1, 7.4),
        p.load("vapi_transcript_final.json"),
        p.load("vapi_user_interrupted.json"),
        p.load("vapi_end_of_call_report.json"),
    ]


def calls_of(platform: str, p: Payloads) -> list[Any]:
    """The deliveries of one call, in the order the platform sends them."""
    if platform == "vapi":
        return vapi_call(p)
    names = {
        "retell": ["retell_call_started.json", "retell_call_ended.json"],
        "twilio": ["twilio_voice_inbound.json", "twilio_status_completed.json"],
        "livekit": [
            "livekit_participant_joined_sip_inbound.json",
            "livekit_participant_left_sip.json",
            "livekit_room_finished.json",
        ],
        "bland": ["bland_post_call.json"],
        "elevenlabs": ["elevenlabs_post_call_transcription.json"],
    }[platform]
    return [p.load(name) for name in names]


def ignored_of(platform: str, p: Payloads) -> list[Any]:
    """What the platform also sends that is no call event (analysis, partial transcripts, a web call, an
    agent joining, a recording finished, a live log line, the audio itself)."""
    names = {
        "vapi": ["vapi_conversation_update.json", "vapi_transcript_partial.json", "vapi_status_update_web_call.json"],
        "retell": ["retell_call_analyzed.json"],
        "twilio": ["twilio_status_initiated.json"],
        "livekit": ["livekit_participant_joined_agent.json", "livekit_egress_ended.json"],
        "bland": ["bland_event_stream.json"],
        "elevenlabs": ["elevenlabs_post_call_audio.json"],
    }[platform]
    found = [p.load(name) for name in names]
    if platform == "elevenlabs":
        found[0]["data"]["full_audio"] = AUDIO
    return found


# What each platform's call becomes (decisions section 16, Mapping): the record's fields, and its
# (user_turns, agent_turns, interruptions).
EXPECTED: dict[str, tuple[dict[str, Any], tuple[int, int, int]]] = {
    "vapi": (
        {
            "call_id": "7c1f6a52-3a1e-4b7d-9a52-0d3c9e1b2f41",
            "provider_call_id": "CA5d3f0b8e2c1a4f6e9b7d0c2a4e6f8b1d",
            "reason": "customer-ended-call",
            "cost": 0.1256,
            "cost_breakdown": {"carrier": 0.0104, "stt": 0.0126, "llm": 0.0211, "tts": 0.0315, "platform": 0.05},
        },
        (1, 1, 1),
    ),
    "retell": (
        {
            "call_id": "Jabr9TXYYJHfvl6Syypi88rdAHYHmcq6",
            "provider_call_id": "CA9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b",
            "reason": "user_hangup",
            # `combined_cost` is in cents.
            "cost": 0.124,
        },
        (2, 2, 0),
    ),
    "twilio": (
        {
            "call_id": "CA5d3f0b8e2c1a4f6e9b7d0c2a4e6f8b1d",
            "provider_call_id": "CA5d3f0b8e2c1a4f6e9b7d0c2a4e6f8b1d",
            "reason": "completed",
            "cost": None,
            "attrs": {
                "attestation": "B",
                "caller_name": "ACME LTD",
                "carrier": "twilio",
                "geo": {"city": "NEW YORK", "region": "NY", "zip": "10001", "country": "US"},
            },
        },
        (0, 0, 0),
    ),
    "livekit": (
        {
            "call_id": "RM_tkGHfLjK8dVc",
            "provider_call_id": "5b3c1e9f7a2d4c6e8f0a1b2c3d4e5f60@0.0.0.0",
            "reason": "CLIENT_INITIATED",
            "cost": None,
        },
        (0, 0, 0),
    ),
    "bland": (
        {
            "call_id": "c1234567-89ab-cdef-0123-456789abcdef",
            "provider_call_id": None,
            "cost": 0.063,
            "attrs": {
                "geo": {"city": "NEW YORK", "region": "NY", "zip": "10001", "country": "US"},
                "answered_by": "human",
            },
        },
        # `robot` (the phone tree) and `agent-action` (a tool step) are nobody's turn.
        (2, 2, 0),
    ),
    "elevenlabs": (
        {
            "call_id": "conv_01jwx3m2a7c4d5e6f7g8h9j0k1",
            "provider_call_id": "CA5d3f0b8e2c1a4f6e9b7d0c2a4e6f8b1d",
            "reason": "Remote party ended the call",
            # `charging`'s fiat prices, not `metadata.cost` (credits).
            "cost": 0.0875,
            "cost_breakdown": {"llm": 0.0042, "platform": 0.0833},
        },
        # The agent's message cut off (`interrupted`) is the caller's cut-in; the tool call is nobody's turn.
        (2, 2, 1),
    ),
}


# -- Signatures: signed by each platform's scheme, checked independently --------------------------------


@dataclass(frozen=True)
class Delivery:
    """One webhook request as the platform makes it: the body's bytes, its headers, where it goes."""

    platform: str
    url: str
    body: bytes
    headers: dict[str, str]
    form: dict[str, str] | None = None


def encoded(platform: str, payload: Any) -> tuple[bytes, dict[str, str], dict[str, str] | None]:
    if platform == "twilio":
        form = {k: str(v) for k, v in payload.items()}
        return urlencode(form).encode(), {"Content-Type": "application/x-www-form-urlencoded"}, form
    # As the Retell SDK serialises a body it signs: compact, unescaped.
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    return body, {"Content-Type": "application/json"}, None


def hmac_hex(secret: str, message: bytes) -> str:
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def sign(platform: str, url: str, payload: Any, secret: str, key: str = "") -> Delivery:
    """The request the platform sends, signed with `secret` as its own code signs it: Twilio's SDK, PyJWT as
    LiveKit's `AccessToken`, and the published HMAC schemes (decisions section 16) for the others."""
    body, headers, form = encoded(platform, payload)
    now = time.time()
    if platform == "vapi":
        stamp = str(int(now * 1000))
        headers |= {"x-timestamp": stamp, "x-signature": hmac_hex(secret, stamp.encode() + b"." + body)}
    elif platform == "retell":
        stamp = str(int(now * 1000))
        headers["x-retell-signature"] = f"v={stamp},d={hmac_hex(secret, body + stamp.encode())}"
    elif platform == "twilio":
        assert form is not None
        headers["X-Twilio-Signature"] = RequestValidator(secret).compute_signature(url, form)
    elif platform == "livekit":
        claims = {
            "video": {},
            "sha256": base64.b64encode(hashlib.sha256(body).digest()).decode(),
            "sub": "",
            "iss": key,
            "nbf": int(now),
            "exp": int(now) + 600,
        }
        headers["Authorization"] = jwt.encode(claims, secret, algorithm="HS256")
    elif platform == "bland":
        headers["X-Webhook-Signature"] = hmac_hex(secret, body)
    else:
        stamp = str(int(now))
        headers["ElevenLabs-Signature"] = f"t={stamp},v0={hmac_hex(secret, stamp.encode() + b'.' + body)}"
    return Delivery(platform, url, body, headers, form)


def rfc2104_sha256(secret: str, message: bytes) -> str:
    """HMAC-SHA256 from its definition (RFC 2104) on hashlib alone: a check independent of `hmac`."""
    block = 64
    raw = secret.encode()
    raw = hashlib.sha256(raw).digest() if len(raw) > block else raw
    raw = raw.ljust(block, b"\0")
    inner = hashlib.sha256(bytes(b ^ 0x36 for b in raw) + message).digest()
    return hashlib.sha256(bytes(b ^ 0x5C for b in raw) + inner).hexdigest()


def fields_of(header: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in header.split(","))


def verifies(delivery: Delivery, secret: str, key: str = "") -> bool:
    """Whether the platform's receiving side accepts the delivery: Twilio's `RequestValidator.validate`,
    PyJWT with the body's hash as LiveKit's `WebhookReceiver.receive`, an independent HMAC otherwise."""
    h, body = delivery.headers, delivery.body
    if delivery.platform == "twilio":
        return bool(RequestValidator(secret).validate(delivery.url, delivery.form or {}, h["X-Twilio-Signature"]))
    if delivery.platform == "livekit":
        try:
            claims = jwt.decode(h["Authorization"], secret, algorithms=["HS256"], issuer=key)
        except jwt.PyJWTError:
            return False
        return bool(base64.b64decode(claims["sha256"]) == hashlib.sha256(body).digest())
    if delivery.platform == "vapi":
        return h["x-signature"] == rfc2104_sha256(secret, h["x-timestamp"].encode() + b"." + body)
    if delivery.platform == "retell":
        parts = fields_of(h["x-retell-signature"])
        return parts["d"] == rfc2104_sha256(secret, body + parts["v"].encode())
    if delivery.platform == "bland":
        return h["X-Webhook-Signature"] == rfc2104_sha256(secret, body)
    parts = fields_of(h["ElevenLabs-Signature"])
    return parts["v0"] == rfc2104_sha256(secret, parts["t"].encode() + b"." + body)


# -- The walk ---------------------------------------------------------------------------------------------

Answer = tuple[int, Any]


async def post(http: aiohttp.ClientSession, delivery: Delivery, headers: dict[str, str] | None = None) -> Answer:
    async with http.post(delivery.url, data=delivery.body, headers=headers or delivery.headers) as r:
        return r.status, await r.json()


async def forwarded(http: aiohttp.ClientSession, base_url: str, account: AccountKeys, delivery: Delivery) -> Answer:
    """The same payload forwarded unchanged by the customer's own handler, with a full key and no signature."""
    headers = {"Content-Type": delivery.headers["Content-Type"], **account.headers}
    async with http.post(f"{base_url}/v1/ingest/{delivery.platform}", data=delivery.body, headers=headers) as r:
        return r.status, await r.json()


async def read(http: aiohttp.ClientSession, base_url: str, account: AccountKeys, path: str) -> Answer:
    async with http.get(f"{base_url}{path}", headers=account.headers) as r:
        return r.status, await r.json()


async def listed(http: aiohttp.ClientSession, base_url: str, account: AccountKeys) -> list[str]:
    status, page = await read(http, base_url, account, "/v1/calls?limit=200")
    assert status == 200, page
    return [c["call_id"] for c in page["data"]]


async def until_configured(http: aiohttp.ClientSession, delivery: Delivery, timeout_s: float = 3.0) -> Answer:
    """The first answer that is not 409 `integration_not_configured`: the edge learns an integration from
    the accounts topic, as it learns keys."""
    deadline = time.monotonic() + timeout_s
    while True:
        answer = await post(http, delivery)
        if answer[0] != 409 or time.monotonic() > deadline:
            return answer
        await asyncio.sleep(0.05)


@dataclass
class Walk:
    """What one platform's account saw."""

    account: AccountKeys
    secret: str
    key: str
    deliveries: list[Delivery]
    ignored: list[Answer] = field(default_factory=list)
    ignored_forwarded: list[Answer] = field(default_factory=list)
    refused: list[Answer] = field(default_factory=list)
    forged_ids: list[str] = field(default_factory=list)
    first: list[Answer] = field(default_factory=list)
    again: list[Answer] = field(default_factory=list)
    forwarded_again: list[Answer] = field(default_factory=list)
    record: Answer = (0, None)
    record_again: Answer = (0, None)
    record_forwarded: Answer = (0, None)
    listed: list[str] = field(default_factory=list)
    listed_again: list[str] = field(default_factory=list)


@dataclass
class Fold:
    """A gated call and its platform's report: what the reports answered and the record(s) they made."""

    answers: list[Answer]
    gate_status: int
    by_carrier_id: Answer
    by_platform_id: Answer
    listed: list[str]


@dataclass
class Walked:
    walks: dict[str, Walk]
    # Vapi's call posted message by message, each twice in a row: (first, retry) answers, and the record.
    live_retries: list[tuple[Answer, Answer]]
    live_record: Answer
    written_after_refusals: list[str]
    folds: dict[str, Fold]
    gate_call_ids: dict[str, tuple[str, str]]
    places: dict[str, list[str]]
    scanned: int


def forged(
    delivery: Delivery, secret: str, key: str, forged_id: str, real_id: str
) -> list[tuple[Delivery, dict[str, str]]]:
    """The delivery under a call id of its own, signed with the wrong secret, and with no signature at all."""
    platform = delivery.platform
    body = delivery.body.replace(real_id.encode(), forged_id.encode())
    payload: Any = (
        {k: v.replace(real_id, forged_id) for k, v in (delivery.form or {}).items()}
        if platform == "twilio"
        else json.loads(body)
    )
    wrong = sign(platform, delivery.url, payload, "not-" + secret, key)
    unsigned = {k: v for k, v in wrong.headers.items() if k not in SIGNATURE_HEADERS[platform]}
    return [(wrong, wrong.headers), (wrong, unsigned)]


async def walk_platform(
    http: aiohttp.ClientSession, service: RunningService, platform: str, account: AccountKeys, walk: Walk
) -> None:
    """After the refusals: the call's deliveries, the same again (a retry), and again forwarded with a key."""
    base = service.base_url
    call_id = EXPECTED[platform][0]["call_id"]
    walk.first = [await post(http, d) for d in walk.deliveries]
    walk.record = await read(http, base, account, f"/v1/calls/{call_id}")
    walk.listed = await listed(http, base, account)
    walk.again = [await post(http, d) for d in walk.deliveries]
    walk.record_again = await read(http, base, account, f"/v1/calls/{call_id}")
    walk.listed_again = await listed(http, base, account)
    walk.forwarded_again = [await forwarded(http, base, account, d) for d in walk.deliveries]
    walk.record_forwarded = await read(http, base, account, f"/v1/calls/{call_id}")


async def fold_carrier_first(
    http: aiohttp.ClientSession, service: RunningService, gate: Gated, secret: str, shift_ms: int
) -> tuple[Fold, str, str]:
    """The gate screens the call, then Retell reports it with the gate's CallSid as `twilio_call_sid`."""
    call_sid, retell_id = sid(), "retell-" + uuid.uuid4().hex[:20]
    status, _, _ = await post_form(
        http, gate.url, voice_form(call_sid, GATE_CALLERS[0], StirVerstat="TN-Validation-Passed-B")
    )
    names = {"CA9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b": call_sid, "Jabr9TXYYJHfvl6Syypi88rdAHYHmcq6": retell_id}
    p = Payloads(shift_ms, GATE_CALLERS[0], names)
    url = f"{service.base_url}/v1/ingest/retell/{gate.account.ingest_token}"
    answers = [
        await post(http, sign("retell", url, p.load(n), secret))
        for n in ("retell_call_started.json", "retell_call_ended.json")
    ]
    fold = Fold(
        answers,
        status,
        await read(http, service.base_url, gate.account, f"/v1/calls/{call_sid}"),
        await read(http, service.base_url, gate.account, f"/v1/calls/{retell_id}"),
        [],
    )
    return fold, call_sid, retell_id


async def fold_platform_first(
    http: aiohttp.ClientSession, service: RunningService, gate: Gated, secret: str, shift_ms: int
) -> tuple[Fold, str, str]:
    """Vapi reports the call's start, the gate then screens it (the carrier's CallSid as Vapi's
    `phoneCallProviderId`), and Vapi's end-of-call report ends it."""
    call_sid, vapi_id = sid(), str(uuid.uuid4())
    names = {"CA5d3f0b8e2c1a4f6e9b7d0c2a4e6f8b1d": call_sid, "7c1f6a52-3a1e-4b7d-9a52-0d3c9e1b2f41": vapi_id}
    p = Payloads(shift_ms, GATE_CALLERS[1], names)
    url = f"{service.base_url}/v1/ingest/vapi/{gate.account.ingest_token}"
    answers = [await post(http, sign("vapi", url, p.load("vapi_status_update.json"), secret))]
    status, _, _ = await post_form(
        http, gate.url, voice_form(call_sid, GATE_CALLERS[1], StirVerstat="TN-Validation-Passed-B")
    )
    answers.append(await post(http, sign("vapi", url, p.load("vapi_end_of_call_report.json"), secret)))
    fold = Fold(
        answers,
        status,
        await read(http, service.base_url, gate.account, f"/v1/calls/{call_sid}"),
        await read(http, service.base_url, gate.account, f"/v1/calls/{vapi_id}"),
        [],
    )
    return fold, call_sid, vapi_id


async def places_of(
    service: RunningService, needles: dict[str, bytes], files_too: set[str]
) -> tuple[dict[str, list[str]], int]:
    """Where each needle was found: every record (key, value, headers) of every topic this service writes,
    and, for those in `files_too`, every file under its directory (its tables, its broker file, its log).
    The same search as tests/test_live.py's `test_turn_text_never_leaves_the_edge`."""
    found: dict[str, list[str]] = {name: [] for name in needles}
    scanned = 0
    for topic in (t for t in await topic_names(service.settings) if t.startswith(service.settings.topic_prefix)):
        for record in await read_topic(service.settings, topic):
            scanned += 1
            raw = [record.key or b"", record.value or b"", *(value or b"" for _, value in record.headers)]
            for name, needle in needles.items():
                if any(needle in part for part in raw) and topic not in found[name]:
                    found[name].append(topic)
    for path in Path(service.data_dir).parent.rglob("*"):
        if path.is_file():
            content = path.read_bytes()
            for name in files_too:
                if needles[name] in content:
                    found[name].append(str(path))
    return found, scanned


@pytest.fixture(scope="module")
async def walked(service: RunningService, http: aiohttp.ClientSession) -> Walked:
    base = service.base_url
    shift_ms = (now_ms() - 120_000 - PAYLOAD_START_MS) // 1000 * 1000
    accounts = {p: await create_account(service.settings, http, base) for p in PLATFORMS}
    live_account, live_secret = await create_account(service.settings, http, base), f"vapi_{uuid.uuid4().hex}"
    walks: dict[str, Walk] = {}
    for platform in PLATFORMS:
        account = accounts[platform]
        walks[platform] = Walk(
            account, f"{platform}_{uuid.uuid4().hex}", LIVEKIT_KEY if platform == "livekit" else "", []
        )
    async with Admin(service.settings) as admin:
        for platform, w in walks.items():
            await admin.integration_set(w.account.account_id, platform, w.secret, w.key)
        await admin.integration_set(live_account.account_id, "vapi", live_secret)

    # What maps to no event (the first one waits for the edge to know the integration), then the refusals.
    for platform, w in walks.items():
        p = Payloads(shift_ms, CALLERS[platform])
        url = f"{base}/v1/ingest/{platform}/{w.account.ingest_token}"
        w.deliveries = [sign(platform, url, payload, w.secret, w.key) for payload in calls_of(platform, p)]
        nothing = [sign(platform, url, payload, w.secret, w.key) for payload in ignored_of(platform, p)]
        w.ignored = [await until_configured(http, nothing[0]), *[await post(http, d) for d in nothing[1:]]]
        w.ignored_forwarded = [await forwarded(http, base, w.account, d) for d in nothing]
        real_id = EXPECTED[platform][0]["call_id"]
        for index, delivery in enumerate(w.deliveries[:1] + w.deliveries[-1:]):
            forged_id = f"forged{index}{uuid.uuid4().hex[:12]}"
            w.forged_ids.append(forged_id)
            for attempt, headers in forged(delivery, w.secret, w.key, forged_id, real_id):
                w.refused.append(await post(http, attempt, headers))
    records = await read_topic(service.settings, service.settings.topic("events"))
    ids = {w.account.account_id for w in walks.values()}
    written = [
        (r.key or b"").decode() for r in records if any(i.encode() in (r.key or b"") + (r.value or b"") for i in ids)
    ]

    for platform, w in walks.items():
        await walk_platform(http, service, platform, w.account, w)

    live = Payloads(shift_ms, LIVE_CALLER)
    url = f"{base}/v1/ingest/vapi/{live_account.ingest_token}"
    await until_configured(http, sign("vapi", url, ignored_of("vapi", live)[0], live_secret))
    live_pairs = []
    for delivery in [sign("vapi", url, payload, live_secret) for payload in vapi_call(live)]:
        live_pairs.append((await post(http, delivery), await post(http, delivery)))
    live_record = await read(http, base, live_account, f"/v1/calls/{EXPECTED['vapi'][0]['call_id']}")

    gate = await gated(service, http)
    secrets = {"retell": f"retell_{uuid.uuid4().hex}", "vapi": f"vapi_{uuid.uuid4().hex}"}
    async with Admin(service.settings) as admin:
        for platform, secret in secrets.items():
            await admin.integration_set(gate.account.account_id, platform, secret)
    for platform, name in (("retell", "retell_call_analyzed.json"), ("vapi", "vapi_conversation_update.json")):
        url = f"{base}/v1/ingest/{platform}/{gate.account.ingest_token}"
        probe = sign(platform, url, Payloads(shift_ms, GATE_CALLERS[0]).load(name), secrets[platform])
        assert await until_configured(http, probe) == (200, NOT_A_CALL_EVENT)
    folds: dict[str, Fold] = {}
    gate_ids: dict[str, tuple[str, str]] = {}
    fold, carrier_id, platform_id = await fold_carrier_first(http, service, gate, secrets["retell"], shift_ms)
    folds["carrier_first"], gate_ids["carrier_first"] = fold, (carrier_id, platform_id)
    fold, carrier_id, platform_id = await fold_platform_first(http, service, gate, secrets["vapi"], shift_ms)
    folds["platform_first"], gate_ids["platform_first"] = fold, (carrier_id, platform_id)
    calls = await listed(http, base, gate.account)
    for fold in folds.values():
        fold.listed = calls

    await settled(service.settings)
    needles = {"canary": CANARY.encode(), "audio": AUDIO.encode()}
    needles |= {f"secret:{p}": w.secret.encode() for p, w in walks.items()}
    needles |= {f"forged:{i}": i.encode() for w in walks.values() for i in w.forged_ids}
    places, scanned = await places_of(service, needles, {"canary", "audio", *(f"secret:{p}" for p in PLATFORMS)})
    return Walked(walks, live_pairs, live_record, written, folds, gate_ids, places, scanned)


# -- The tests --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("platform", PLATFORMS)
async def test_a_signed_native_payload_makes_the_call_record(walked: Walked, platform: str) -> None:
    walk = walked.walks[platform]
    # What was sent is what the platform's own receiving code accepts, and only with the right secret.
    assert all(verifies(d, walk.secret, walk.key) for d in walk.deliveries)
    assert not any(verifies(d, "not-" + walk.secret, walk.key) for d in walk.deliveries)
    for status, answer in walk.first:
        assert status == 200 and isinstance(answer["events"], list) and answer["events"], answer
    start = walk.first[0][1]["events"][0]
    fields, (user_turns, agent_turns, interruptions) = EXPECTED[platform]
    assert start["call_id"] == fields["call_id"] and start["action"] in ("allow", "review", "reject")
    status, record = walk.record
    assert status == 200, record
    expected = {
        "from": CALLERS[platform],
        "to": NUMBER,
        "direction": "inbound",
        "source": platform,
        "state": "ended",
        "duration_s": 42,
        "reason": "ended",
        "cost_breakdown": None,
        **fields,
    }
    attrs = expected.pop("attrs", None)
    assert {k: record.get(k) for k in expected} == expected
    if attrs is not None:
        assert {k: record["attrs"].get(k) for k in attrs} == attrs
    counts = (record["user_turns"], record["agent_turns"], record["interruptions"])
    assert counts == (user_turns, agent_turns, interruptions)
    assert walk.listed == [fields["call_id"]]


@pytest.mark.parametrize("platform", PLATFORMS)
async def test_a_wrong_or_missing_signature_is_refused_and_writes_nothing(walked: Walked, platform: str) -> None:
    walk = walked.walks[platform]
    assert len(walk.refused) == 4
    assert walk.refused == [(401, {"error": "invalid_signature"})] * 4
    # Refusals and ignored messages were all the account had posted: nothing of it on the events topic.
    assert not [key for key in walked.written_after_refusals if key.startswith(walk.account.account_id)]
    for forged_id in walk.forged_ids:
        assert walked.places[f"forged:{forged_id}"] == []


@pytest.mark.parametrize("platform", PLATFORMS)
async def test_the_same_delivery_twice_changes_nothing(walked: Walked, platform: str) -> None:
    walk = walked.walks[platform]
    call_id = EXPECTED[platform][0]["call_id"]
    problems = []
    final = walk.record[1]
    for path, answers in (("signed again", walk.again), ("forwarded with a key", walk.forwarded_again)):
        for delivery, (status, answer), (_, first) in zip(walk.deliveries, answers, walk.first, strict=True):
            sent = delivery.form.get("CallStatus") if delivery.form else json.loads(delivery.body).get("message", {})
            what = sent.get("type") if isinstance(sent, dict) else sent
            # The same bytes are the same records (docs/api.md, Platform webhooks): each answered again as
            # it was, a turn's as the call stands, counted nowhere twice.
            pairs = zip(first["events"], answer["events"], strict=True)
            if status != 200 or not all(answered_again(one, two, final) for one, two in pairs):
                problems.append(f"{path}: {what}: {status} {answer}")
    for path, (status, record) in (("signed again", walk.record_again), ("forwarded", walk.record_forwarded)):
        changed = {k: (walk.record[1].get(k), v) for k, v in record.items() if walk.record[1].get(k) != v}
        if status != 200 or changed:
            problems.append(f"record after {path}: {status} changed {changed}")
    assert not problems, "\n".join(problems)
    assert walk.listed_again == [call_id]


def answered_again(first: dict[str, Any], again: dict[str, Any], record: dict[str, Any]) -> bool:
    """A retried event's answer: a start's or an end's is its first answer; a turn's is the live picture
    of the call as it stands, with the record's counts."""
    if "user_turns" in again:
        return all(again[k] == record[k] for k in ("user_turns", "agent_turns", "interruptions"))
    return again == first


async def test_each_live_message_retried_at_once_counts_once(walked: Walked) -> None:
    """A platform's retry while the call is live (Vapi's messages come one by one): the retry answers what
    the first did (marked `duplicate` where the contract marks it), and no turn or cut-in counts twice."""
    problems = []
    for (status, first), (again_status, again) in walked.live_retries:
        assert (status, again_status) == (200, 200), (first, again)
        for one, two in zip(first["events"], again["events"], strict=True):
            if two not in ({**one, "duplicate": True}, one):
                problems.append(f"first {one}, retried {two}")
    status, record = walked.live_record
    assert status == 200, record
    counts = (record["user_turns"], record["agent_turns"], record["interruptions"])
    assert not problems and counts == EXPECTED["vapi"][1], ("\n".join(problems), counts)


@pytest.mark.parametrize("platform", PLATFORMS)
async def test_a_message_that_maps_to_nothing_is_ignored(walked: Walked, platform: str) -> None:
    walk = walked.walks[platform]
    assert walk.ignored and walk.ignored == [(200, NOT_A_CALL_EVENT)] * len(walk.ignored)
    assert walk.ignored_forwarded == walk.ignored


def test_no_canary_word_reaches_a_topic_table_file_or_log(walked: Walked) -> None:
    # The word stood in transcripts, summaries and recording URLs of what was posted.
    vapi_report = json.loads(walked.walks["vapi"].deliveries[-1].body)["message"]
    assert CANARY in vapi_report["analysis"]["summary"] and CANARY in vapi_report["artifact"]["recordingUrl"]
    assert CANARY in vapi_report["artifact"]["transcript"]
    retell_end = json.loads(walked.walks["retell"].deliveries[-1].body)["call"]
    assert CANARY in retell_end["transcript_object"][1]["content"] and CANARY in retell_end["recording_url"]
    bland = json.loads(walked.walks["bland"].deliveries[0].body)
    assert CANARY in bland["summary"] and CANARY in bland["recording_url"] and CANARY in bland["transcripts"][1]["text"]
    elevenlabs = json.loads(walked.walks["elevenlabs"].deliveries[0].body)["data"]
    assert CANARY in elevenlabs["transcript"][1]["message"] and CANARY in elevenlabs["analysis"]["transcript_summary"]
    assert CANARY in (walked.walks["twilio"].deliveries[-1].form or {})["RecordingUrl"]
    assert walked.scanned > 0
    assert walked.places["canary"] == [] and walked.places["audio"] == []
    # And the integrations' secrets are sealed at rest.
    for platform in PLATFORMS:
        assert walked.places[f"secret:{platform}"] == [], platform


@pytest.mark.parametrize("order", ["carrier_first", "platform_first"])
async def test_a_gated_call_and_its_platform_report_fold_into_one_record(walked: Walked, order: str) -> None:
    fold = walked.folds[order]
    carrier_id, platform_id = walked.gate_call_ids[order]
    assert fold.gate_status == 200
    for status, answer in fold.answers:
        assert status == 200, answer
    by_carrier, by_platform = fold.by_carrier_id, fold.by_platform_id
    assert by_carrier[0] == 200 and by_platform == by_carrier, (by_carrier, by_platform)
    record = by_carrier[1]
    # One record: counted once, under the first report's id, the other's turns, cost and attrs merged in.
    assert fold.listed.count(record["call_id"]) == 1
    assert {carrier_id, platform_id} & set(fold.listed) == {record["call_id"]}
    assert record["provider_call_id"] == carrier_id
    assert (record["attrs"]["attestation"], record["attrs"]["carrier"]) == ("B", "twilio")
    assert record["state"] == "ended"
    if order == "carrier_first":
        assert (record["call_id"], record["source"]) == (carrier_id, "gate")
        # The Retell report's start answered as decided, under the id Retell sent.
        start = fold.answers[0][1]["events"][0]
        assert (start["call_id"], start.get("duplicate")) == (platform_id, True)
        assert (record["user_turns"], record["agent_turns"], record["cost"]) == (2, 2, 0.124)
        assert record["reason"] == "user_hangup"
    else:
        assert (record["call_id"], record["source"]) == (platform_id, "vapi")
        assert (record["cost"], record["reason"]) == (0.1256, "customer-ended-call")
