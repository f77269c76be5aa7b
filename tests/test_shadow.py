"""Shadow runs through the real broker, workers and shadow role (decisions section 17): the live policy as the
candidate flips nothing, a lower reject threshold flips exactly the calls whose live score lies between the
two thresholds, a run appends nothing to the live topics (no alert, block or delivery), and the edge refuses
a second run while one is running and the bodies the contract refuses."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import aiohttp
import jsonschema
import orjson
import pytest

import schemas
from domain.rules import MIN_MS
from domain.times import format_ms
from infra.clock import now_ms
from tests.service import AccountKeys, RunningService, create_account, running_service
from tests.test_topic_schemas import branch_required, format_checker, kind_of, pinned_kinds
from tests.topics import read_topic

pytestmark = pytest.mark.pipeline

TO = "+14155552671"
# The live reject threshold, and the candidate's.
LIVE_REJECT, CANDIDATE_REJECT = 0.8, 0.6
RUN_TIMEOUT_S = 60.0
LIVE_TOPICS = ("alerts", "deliveries", "decisions", "events")


@pytest.fixture(scope="module")
def service(kafka: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    """A service of its own, for this module's accounts: a run reads the whole log, and the session's shared
    service holds every other test's events too."""
    with running_service(tmp_path_factory.mktemp("shadow") / "data", kafka) as running:
        yield running


class Client:
    def __init__(self, http: aiohttp.ClientSession, service: RunningService, account: AccountKeys) -> None:
        self.http, self.base_url, self.account = http, service.base_url, account
        self.base = now_ms() - 60 * MIN_MS

    def at(self, minute: float) -> str:
        return format_ms(self.base + int(minute * MIN_MS))

    async def post(self, path: str, body: Any, status: int = 200) -> dict[str, Any]:
        async with self.http.post(f"{self.base_url}{path}", json=body, headers=self.account.headers) as r:
            assert r.status == status, await r.text()
            return dict(await r.json())

    async def call(self, call_id: str, caller: str, minute: float, attestation: str) -> dict[str, Any]:
        """A start and its end a second later (an ended call has nothing left for the sweeps to tick)."""
        body = {"type": "call.started", "call_id": call_id, "to": TO, "from": caller, "at": self.at(minute)}
        answer = await self.post("/v1/events", {**body, "attrs": {"attestation": attestation}})
        end = {"type": "call.ended", "call_id": call_id, "reason": "completed", "at": self.at(minute + 1 / 60)}
        await self.post("/v1/events", end)
        return answer

    async def shadow(self, policy: dict[str, Any], until: str | None = None) -> str:
        body = {"since": self.at(-1), "until": until or format_ms(now_ms() + MIN_MS), "policy": policy}
        started = await self.post("/v1/shadow", body, status=202)
        assert started["state"] == "running" and started["id"].startswith("shd_")
        return str(started["id"])

    async def result(self, run_id: str) -> dict[str, Any]:
        """The run once done; its progress never goes back meanwhile."""
        deadline = time.monotonic() + RUN_TIMEOUT_S
        progress = 0.0
        while True:
            async with self.http.get(f"{self.base_url}/v1/shadow/{run_id}", headers=self.account.headers) as r:
                assert r.status == 200
                body: dict[str, Any] = await r.json()
            assert body["progress"] >= progress
            progress = body["progress"]
            if body["state"] == "done":
                return body
            assert body["flipped"] == [] and body["state"] == "running"
            assert time.monotonic() < deadline, f"run {run_id} not done: {body['progress']}"
            await asyncio.sleep(0.2)


async def live_records(service: RunningService, account_id: str) -> Counter[str]:
    """The account's records on each live topic, by topic and kind."""
    counts: Counter[str] = Counter()
    for topic in LIVE_TOPICS:
        for record in await read_topic(service.settings, service.settings.topic(topic)):
            value = orjson.loads(record.value)
            if value.get("account_id") == account_id:
                counts[f"{topic} {value.get('kind') or value.get('type')}"] += 1
    return counts


async def settled_records(service: RunningService, account_id: str) -> Counter[str]:
    """The account's live records once the detectors and the alerting role are through with its calls:
    the same twice in a row, half a second apart."""
    deadline = time.monotonic() + 15.0
    before = await live_records(service, account_id)
    while True:
        await asyncio.sleep(0.5)
        after = await live_records(service, account_id)
        if after == before:
            return after
        assert time.monotonic() < deadline, "the account's records never settled"
        before = after


async def test_a_candidate_flips_exactly_the_calls_between_the_thresholds_and_touches_nothing_live(
    service: RunningService, http: aiohttp.ClientSession, account: AccountKeys
) -> None:
    c = Client(http, service, account)
    answers = {
        "plain": await c.call("plain", "+12125550171", 0, "A"),
        "c": await c.call("c", "+12125550172", 1, "C"),
        "failed": await c.call("failed", "+12125550173", 2, "failed"),
        # A neighbour's prefix and a failed attestation: 0.6625, review live, reject under the candidate.
        "neighbour": await c.call("neighbour", "+14155550174", 3, "failed"),
        # Calling itself: 0.60, exactly the candidate's threshold.
        "self": await c.call("self", TO, 4, "A"),
    }
    # Seven calls in a minute from one caller: rate_exceeded, then blocked; an alert and a block live.
    for i in range(7):
        answers[f"rate{i}"] = await c.call(f"rate{i}", "+12125550175", 10 + i / 10, "A")
    assert "blocked" in answers["rate6"]["reasons"]
    await c.post("/v1/calls/failed/label", {"label": "spam"})
    await c.post("/v1/calls/plain/label", {"label": "good"})
    live = await settled_records(service, account.account_id)
    assert live["alerts caller.rate_exceeded"] >= 1 and live["decisions block.placed"] >= 1

    unchanged = await c.result(await c.shadow({}))
    assert unchanged["calls"] == len(answers)
    assert unchanged["flipped"] == []
    assert all(n == 0 for a, row in unchanged["matrix"].items() for b, n in row.items() if a != b)
    by_action = Counter(answer["action"] for answer in answers.values())
    assert {a: unchanged["matrix"][a][a] for a in by_action} == dict(by_action)

    run_id = await c.shadow({"thresholds": {"reject": CANDIDATE_REJECT}})
    lowered = await c.result(run_id)
    between = {call_id for call_id, a in answers.items() if CANDIDATE_REJECT <= a["score"] < LIVE_REJECT}
    assert {"neighbour", "self"} <= between
    assert {f["call_id"] for f in lowered["flipped"]} == between
    for flipped in lowered["flipped"]:
        answer = answers[flipped["call_id"]]
        assert flipped["from"] == flipped["live"]["action"] == answer["action"] == "review"
        assert flipped["to"] == flipped["shadow"]["action"] == "reject"
        assert flipped["live"]["score"] == answer["score"] and flipped["live"]["reasons"] == answer["reasons"]
    assert lowered["matrix"]["review"]["reject"] == len(between)
    assert lowered["matrix"]["reject"]["reject"] == by_action["reject"]
    assert lowered["labels"]["review"]["review"] == {"spam": 1, "good": 0}
    assert lowered["labels"]["allow"]["allow"] == {"spam": 0, "good": 1}
    # An hour of calls: one UTC day, or two across midnight.
    assert [d["date"] for d in lowered["daily"]] == sorted({a[:10] for a in (c.at(0), c.at(11))})
    assert sum(d["calls"] for d in lowered["daily"]) == len(answers)
    assert sum(d["shadow"]["reject"] for d in lowered["daily"]) == by_action["reject"] + len(between)
    assert sum(d["live"]["reject"] for d in lowered["daily"]) == by_action["reject"]
    for day in lowered["daily"]:
        assert sum(day["live"].values()) == sum(day["shadow"].values()) == day["calls"]

    async with http.get(f"{c.base_url}/v1/shadow/{run_id}?format=csv", headers=account.headers) as r:
        assert r.status == 200 and r.content_type == "text/csv"
        rows = (await r.text()).splitlines()
    assert rows[0] == "call_id,at,from,to,live_score,shadow_score,live_reasons,shadow_reasons"
    assert sorted(row.split(",")[0] for row in rows[1:]) == sorted(between)

    # Neither run appended anything of the account's to a live topic.
    assert await live_records(service, account.account_id) == live
    assert_shadow_records_match_their_schema(
        [orjson.loads(r.value) for r in await read_topic(service.settings, service.settings.topic("shadow"))]
    )


def assert_shadow_records_match_their_schema(values: list[dict[str, Any]]) -> None:
    """The shadow topic's records as tests/test_topic_schemas.py checks every other topic's: each kind
    appears, has its branch, and loses its validity without any field its branch requires."""
    schema = schemas.load("shadow.schema.json")
    validator = jsonschema.Draft202012Validator(schema, format_checker=format_checker())
    assert {kind_of("shadow", v) for v in values} == {
        "shadow.requested",
        "shadow.progress",
        "shadow.result",
        "shadow.done",
    }
    pinned = pinned_kinds(schema, "kind")
    for value in values:
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(value)]
        assert not errors, f"shadow record {value} breaks its schema: {errors}"
        kind = kind_of("shadow", value)
        assert kind in pinned, f"shadow kind {kind} has no schema branch"
        for field in [*schema["required"], *branch_required(schema, "kind", kind)]:
            assert not validator.is_valid({k: v for k, v in value.items() if k != field}), (kind, field)


async def test_one_run_at_a_time_and_the_bodies_the_contract_refuses(
    service: RunningService, http: aiohttp.ClientSession, account: AccountKeys
) -> None:
    c = Client(http, service, account)
    await c.call("one", "+12125550176", 0, "C")
    # A run reads the records appended before its `until`: here, every one.
    since, until = c.at(-1), format_ms(now_ms() + MIN_MS)
    refused = [
        ({"since": "yesterday", "until": until, "policy": {}}, "since"),
        ({"until": until, "policy": {}}, "since"),
        ({"since": since, "until": "soon", "policy": {}}, "until"),
        ({"since": until, "until": since, "policy": {}}, "until"),
        ({"since": since, "until": since, "policy": {}}, "until"),
        ({"since": since, "until": format_ms(c.base + 31 * 86_400_000 + 1), "policy": {}}, "until"),
        ({"since": since, "until": until, "policy": {"thresholds": {"review": 1.5}}}, "policy.thresholds.review"),
        ({"since": since, "until": until, "policy": {"weights": {"nonsense": 0.1}}}, "policy.weights.nonsense"),
        ({"since": since, "until": until}, "policy"),
    ]
    for body, field in refused:
        assert await c.post("/v1/shadow", body, status=400) == {"error": "invalid_field", "field": field}
    assert await c.post("/v1/shadow", [since, until], status=400) == {"error": "invalid_body"}

    run_id = await c.shadow({"thresholds": {"review": 0.3}}, until=until)
    # The edge that took the request knows of it at once: the second is refused while the first runs.
    assert await c.post("/v1/shadow", {"since": since, "until": until, "policy": {}}, status=409) == {
        "error": "shadow_running"
    }
    other = await create_account(service.settings, http, service.base_url)
    async with http.get(f"{c.base_url}/v1/shadow/{run_id}", headers=other.headers) as r:
        assert (r.status, await r.json()) == (404, {"error": "not_found"})
    async with http.get(f"{c.base_url}/v1/shadow/shd_0000000000000000", headers=account.headers) as r:
        assert (r.status, await r.json()) == (404, {"error": "not_found"})
    async with http.get(f"{c.base_url}/v1/shadow/{run_id}?format=xml", headers=account.headers) as r:
        assert (r.status, await r.json()) == (400, {"error": "invalid_field", "field": "format"})
    # The other account may run one of its own meanwhile.
    await Client(http, service, other).shadow({})

    done = await c.result(run_id)
    assert done["calls"] == 1 and done["matrix"]["allow"]["review"] == 1
    assert [f["call_id"] for f in done["flipped"]] == ["one"]
    # Once done, the next run is taken.
    await c.result(await c.shadow({}, until=until))
