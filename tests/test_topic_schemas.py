"""Every record on the source topics matches its published JSON Schema (schemas/<topic>.schema.json).

One account drives each record kind the service writes (events, account changes, decisions, blocks and
patterns, delivery records, billing) through the real pipeline; every record of that account on each
topic is then validated, and each kind driven must be present, so the test cannot pass vacuously.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import jsonschema
import orjson
import pytest

import schemas
from callscreen.admin import Admin
from domain.times import format_ms
from infra.clock import now_ms
from tests.service import AccountKeys, RunningService
from tests.test_alerts import NUMBER, Traffic
from tests.topics import read_topic
from tests.traffic import outbound_in_effect, outbound_start

pytestmark = pytest.mark.pipeline

SCHEMAS = {
    "events": "events.schema.json",
    "accounts": "accounts.schema.json",
    "decisions": "decisions.schema.json",
    "deliveries": "deliveries.schema.json",
    "billing": "billing.schema.json",
    "alerts": "alert.schema.json",
    "shadow": "shadow.schema.json",
}
# The field naming each record's kind, per topic.
KIND_FIELD = {"events": "type", "alerts": "type"}
# What this test drives, per topic: each must be on the topic for its account.
DRIVEN = {
    "events": {
        "call.started",
        "call.ended",
        "turn.started",
        "turn.ended",
        "interruption",
        "transcript",
        "tick",
        "call.label",
    },
    "accounts": {
        "account.created",
        "key.created",
        "key.revoked",
        "token.rotated",
        "plan.set",
        "trusted.added",
        "trusted.removed",
        "secret.rotated",
        "webhook.set",
        "outbound.set",
        "outbound.paused",
        "outbound.resumed",
    },
    "decisions": {"call.decided", "call.refused", "call.settled", "call.labelled", "block.placed", "pattern.active"},
    "deliveries": {"delivery.skipped"},
    "billing": {"payment.failed"},
    "alerts": {
        "caller.rate_exceeded",
        "caller.rotating_numbers",
        "call.long_running",
        "billing.payment_failed",
        "outbound.destination_burst",
        "outbound.paused",
    },
    # Driven by tests/test_shadow.py on a service of its own: a run reads the whole log, and this session's
    # service holds every other test's events.
    "shadow": set(),
}
OTHER_NUMBER = "+14155552672"
UNREGISTERED = "+14155552699"
CALLER = "+12025550143"
RATE_CALLER = "+447911200077"
ROTATING = [f"+1212555{7400 + i}" for i in range(4)]
# Turn text: measured at the edge and dropped; it must never reach a topic.
SPOKEN = "please read me the sixteen digits on the front of your card"
TIMEOUT_S = 15.0


def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    return datetime.fromisoformat(value.replace("Z", "+00:00")).tzinfo is not None


def _is_uri(value: object) -> bool:
    if not isinstance(value, str):
        return True
    parts = urlsplit(value)
    return bool(parts.scheme and parts.netloc)


def format_checker() -> Any:
    """The default checkers, plus date-time and uri, whose optional dependencies may be absent."""
    checker = jsonschema.FormatChecker()
    checker.checks("date-time", raises=ValueError)(_is_date_time)
    checker.checks("uri", raises=ValueError)(_is_uri)
    return checker


def pinned_kinds(schema: dict[str, Any], field: str) -> set[str]:
    """The kinds a schema pins with an if/then branch on `field`."""
    return {
        str(branch["if"]["properties"][field]["const"])
        for branch in schema.get("allOf", [])
        if field in branch.get("if", {}).get("properties", {})
    }


def branch_required(schema: dict[str, Any], field: str, kind: str) -> list[str]:
    """The fields the schema's branch for `kind` requires on top of the common ones."""
    for branch in schema.get("allOf", []):
        if branch.get("if", {}).get("properties", {}).get(field, {}).get("const") == kind:
            return list(branch["then"].get("required", []))
    return []


def test_topic_schemas_are_valid_draft_2020_12() -> None:
    for topic, name in SCHEMAS.items():
        schema = schemas.load(name)
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["$id"] == f"https://callscreen.dev/schemas/{name}"
        assert DRIVEN[topic] <= pinned_kinds(schema, KIND_FIELD.get(topic, "kind")), topic


class Driver:
    """Posts events for one account, each answered by the worker that owns its call."""

    def __init__(self, http: aiohttp.ClientSession, service: RunningService, account: AccountKeys) -> None:
        self.http, self.base_url, self.account = http, service.base_url, account
        self.traffic = Traffic(http, service, account)

    def at(self, seconds: float) -> str:
        return format_ms(self.traffic.base + int(seconds * 1000))

    async def post(self, body: dict[str, Any], status: int = 200) -> dict[str, Any]:
        url = f"{self.base_url}/v1/events"
        async with self.http.post(url, json=body, headers=self.account.headers) as r:
            assert r.status == status, await r.text()
            answer: dict[str, Any] = await r.json()
            return answer


async def drive(d: Driver) -> None:
    """One of each event kind, a forwarded alias, a refusal, and two detections (blocks and a pattern)."""
    started = await d.post(
        {
            "type": "call.started",
            "call_id": "s1",
            "to": NUMBER,
            "from": CALLER,
            "at": d.at(0),
            "provider_call_id": "pc-s1",
            "cost": 0.01,
            "cost_breakdown": {"carrier": 0.01},
            "attrs": {"attestation": "b", "geo": {"zip": "94103"}},
        }
    )
    assert started["call_id"] == "s1"
    turns: list[dict[str, Any]] = [
        {"type": "turn.started", "role": "agent", "turn": 1, "at": d.at(1)},
        {"type": "turn.ended", "role": "agent", "turn": 1, "text": "Hello, how can I help?", "at": d.at(3)},
        {"type": "turn.started", "role": "user", "turn": 1, "at": d.at(4)},
        {"type": "interruption", "at": d.at(5)},
        {"type": "turn.ended", "role": "user", "turn": 1, "text": SPOKEN, "interrupted": True, "at": d.at(9)},
        {"type": "transcript", "role": "user", "turn": 1, "text": SPOKEN, "at": d.at(10)},
    ]
    for turn in turns:
        await d.post({"call_id": "s1", **turn})
    # Named by its provider id: forwarded to s1 under s1's key.
    end = {"type": "call.ended", "call_id": "pc-s1", "reason": "completed", "at": d.at(60), "disposition": "good"}
    ended = await d.post(end)
    assert ended["call_id"] == "s1" and "duplicate" not in ended
    # The owner's label over the platform's disposition: a `call.label` event and a `call.labelled` fact.
    async with d.http.post(f"{d.base_url}/v1/calls/s1/label", json={"label": "spam"}, headers=d.account.headers) as r:
        assert r.status == 200 and (await r.json())["label"] == "spam"
    again = await d.post({"type": "call.ended", "call_id": "s1", "reason": "completed", "at": d.at(60)})
    assert again["duplicate"] is True
    refused = {"type": "call.started", "call_id": "r1", "to": UNREGISTERED, "from": CALLER, "register": False}
    assert await d.post({**refused, "at": d.at(70)}, status=409) == {"error": "not_protected"}
    # Left open past its ceiling: its platform reports it on time (a turn of now), so the sweep appends a
    # tick as it passes 30 minutes, 3 s from now, which raises call.long_running (`domain.calls.tick_after`).
    opened = now_ms() - 30 * 60_000 + 3_000
    await d.post({"type": "call.started", "call_id": "open1", "to": NUMBER, "from": CALLER, "at": format_ms(opened)})
    spoke = format_ms(opened + 29 * 60_000 + 57_000)
    assert (await d.post({"type": "turn.started", "call_id": "open1", "role": "user", "at": spoke}))["flags"] == []
    t = d.traffic
    for i in range(6):
        answer = await t.start(RATE_CALLER, 10 + i)
    assert "rate_exceeded" in answer["reasons"]
    for i, caller in enumerate(ROTATING):
        await t.start(caller, 30 + i * 0.2, to=OTHER_NUMBER)
    # An agent's outbound calls: a burst under one prefix, which pauses the account's outbound, and a start
    # stamped with the pause once it reaches the edge.
    for i in range(5):
        await t.post(outbound_start(f"out{i}", t.base + (40 + i) * 60_000, f"+12025550{i + 1}00"))
    await outbound_in_effect(d.http, d.base_url, d.account, "+19197770801", ["outbound_paused"])
    paused = await t.post(outbound_start("out-paused", t.base + 45 * 60_000, "+19197770801", transfer=True))
    assert paused["reasons"] == ["outbound_paused", "transfer_not_allowed"]


async def administer(settings: Any, account_id: str) -> None:
    async with Admin(settings) as admin:
        key = await admin.key_create(account_id, "read", "schemas")
        await admin.key_revoke(account_id, key["key_id"])
        await admin.token_rotate(account_id, "ingest")
        await admin.token_rotate(account_id, "gate", NUMBER)
        await admin.plan_set(account_id, "guard")
        await admin.trusted("add", account_id, "+12025550111")
        await admin.trusted("remove", account_id, "+12025550111")
        await admin.secret_rotate(account_id)
        await admin.payment_failed(account_id, 1999, 1)
        await admin.outbound_set(account_id, {"countries": ["US"], "transfer": ["+1202555"], "pause_on": "critical"})
        # The burst's pause (a worker's record) is in the view: the owner resumes.
        await admin.outbound_resume(account_id)


def kind_of(topic: str, value: dict[str, Any]) -> str:
    return str(value.get(KIND_FIELD.get(topic, "kind")))


async def records_of(service: RunningService, account_id: str) -> dict[str, list[tuple[bytes, dict[str, Any]]]]:
    """(key, value) of every record of the account on each topic, once every driven kind is there."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        found: dict[str, list[tuple[bytes, dict[str, Any]]]] = {}
        for topic in SCHEMAS:
            records = await read_topic(service.settings, service.settings.topic(topic))
            values = [(r.key, orjson.loads(r.value)) for r in records]
            found[topic] = [(k, v) for k, v in values if v.get("account_id") == account_id]
        missing = {t: DRIVEN[t] - {kind_of(t, v) for _, v in found[t]} for t in SCHEMAS}
        # Every alert has its delivery record (here all skipped: the account has no webhook).
        missing["deliveries"] |= {v["id"] for _, v in found["alerts"]} - {v["alert_id"] for _, v in found["deliveries"]}
        if not any(missing.values()):
            return found
        assert time.monotonic() < deadline, f"never appeared: {missing}"
        await asyncio.sleep(0.2)


async def test_every_record_matches_its_topic_schema(
    service: RunningService, http: aiohttp.ClientSession, account: AccountKeys
) -> None:
    acct = account.account_id
    async with http.patch(
        f"{service.base_url}/v1/account", json={"alert_webhook_url": None}, headers=account.headers
    ) as r:
        assert r.status == 200
    driver = Driver(http, service, account)
    await drive(driver)
    await administer(service.settings, acct)
    found = await records_of(service, acct)

    checker = format_checker()
    for topic, name in SCHEMAS.items():
        schema = schemas.load(name)
        validator = jsonschema.Draft202012Validator(schema, format_checker=checker)
        pinned = pinned_kinds(schema, KIND_FIELD.get(topic, "kind"))
        for _, value in found[topic]:
            errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(value)]
            assert not errors, f"{topic} record {value} breaks its schema: {errors}"
            kind = kind_of(topic, value)
            assert kind in pinned, f"{topic} kind {kind} has no schema branch"
            # The schema bites: dropping any field it requires of this kind makes the record invalid.
            for field in [*schema["required"], *branch_required(schema, KIND_FIELD.get(topic, "kind"), kind)]:
                assert not validator.is_valid({k: v for k, v in value.items() if k != field}), (topic, kind, field)

    for key, value in found["events"]:
        assert key.decode() in (f"{acct}:{value['call_id']}", f"{acct}:s1"), key
        assert SPOKEN.encode() not in orjson.dumps(value) and "text" not in value
    forwarded = [v for k, v in found["events"] if k.decode() != f"{acct}:{v['call_id']}"]
    assert forwarded and {v["call_id"] for v in forwarded} == {"pc-s1"}
    hashed = [v for _, v in found["events"] if v["type"] in ("turn.ended", "transcript") and v.get("role") == "user"]
    assert hashed and all(v["words"] == len(SPOKEN.split()) and len(v["hash"]) == 12 for v in hashed)
    for key, value in found["decisions"]:
        assert key.decode() == f"{acct}:{value['number']}"
    for topic in ("accounts", "billing", "alerts", "shadow"):
        assert all(key == acct.encode() for key, _ in found[topic]), topic
    for key, value in found["deliveries"]:
        assert key == value["alert_id"].encode()
    events = jsonschema.Draft202012Validator(schemas.load("events.schema.json"), format_checker=checker)
    assert not events.is_valid({**hashed[0], "text": SPOKEN})
