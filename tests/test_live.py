"""The live monitor through the real pipeline: turns placed by `at`, flags, the cap, privacy."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from domain.times import format_ms
from infra.clock import now_ms
from tests.service import AccountKeys, RunningService
from tests.topics import read_topic, topic_names

TO = "+14155552671"
CALLER = "+447911123456"


class Call:
    """One call of one account, with turns placed at seconds after its start."""

    def __init__(self, http: aiohttp.ClientSession, base_url: str, account: AccountKeys, call_id: str) -> None:
        self.http, self.base_url, self.account, self.call_id = http, base_url, account, call_id
        self.started = now_ms() - 600_000

    async def post(self, body: dict[str, Any]) -> tuple[int, Any]:
        async with self.http.post(f"{self.base_url}/v1/events", json=body, headers=self.account.headers) as r:
            return r.status, await r.json()

    async def start(self, **fields: Any) -> Any:
        status, body = await self.post(
            {
                "type": "call.started",
                "call_id": self.call_id,
                "to": TO,
                "from": CALLER,
                "at": format_ms(self.started),
                **fields,
            }
        )
        assert status == 200, body
        return body

    def event(self, kind: str, second: float, **fields: Any) -> dict[str, Any]:
        return {"type": kind, "call_id": self.call_id, "at": format_ms(self.started + int(second * 1000)), **fields}

    async def send(self, kind: str, second: float, **fields: Any) -> Any:
        status, body = await self.post(self.event(kind, second, **fields))
        assert status == 200, body
        return body

    async def turn(self, role: str, begin: float, end: float, **fields: Any) -> Any:
        await self.send("turn.started", begin, role=role)
        return await self.send("turn.ended", end, role=role, **fields)

    async def record(self) -> Any:
        async with self.http.get(f"{self.base_url}/v1/calls/{self.call_id}", headers=self.account.headers) as r:
            return await r.json()


@pytest.fixture
def call(http: aiohttp.ClientSession, base_url: str, account: AccountKeys, request: pytest.FixtureRequest) -> Call:
    return Call(http, base_url, account, request.node.name[:60])


async def test_turn_answer_counts_and_reasons(call: Call) -> None:
    await call.start()
    await call.turn("agent", 1, 4, words=8)
    answer = await call.turn("user", 5, 7, text="Hi, I would like to book a table")
    assert answer == {"flags": [], "score": 0.0, "spam_score": 0, "user_turns": 1, "agent_turns": 1, "interruptions": 0}
    answer = await call.send("interruption", 8)
    assert answer["interruptions"] == 1
    record = await call.record()
    assert (record["user_turns"], record["agent_turns"], record["interruptions"]) == (1, 1, 1)


async def test_recording_likely_at_45_seconds_not_44(call: Call) -> None:
    await call.start()
    below = await call.turn("user", 1, 45)
    assert below["flags"] == []
    at = await call.turn("user", 50, 95)
    assert at["flags"] == ["recording_likely"]
    assert at["score"] == 0.6
    assert "live_recording_likely" in (await call.record())["reasons"]


async def test_monologue_from_long_caller_turns(call: Call) -> None:
    await call.start()
    for i in range(3):
        answer = await call.send("turn.ended", 10 + i * 30, role="user", words=65)
    assert answer["flags"] == ["monologue"]


async def test_barge_storm_at_six_interruptions_in_a_minute(call: Call) -> None:
    await call.start()
    for i in range(5):
        answer = await call.send("interruption", 10 + i * 5)
    assert answer["flags"] == []
    answer = await call.send("interruption", 69)
    assert answer["flags"] == ["barge_storm"]


async def test_rapid_fire_at_eight_turns_in_ten_seconds(call: Call) -> None:
    await call.start()
    for i in range(7):
        answer = await call.send("turn.started", 20 + i, role="user")
    assert answer["flags"] == []
    answer = await call.send("turn.started", 29.5, role="user")
    assert answer["flags"] == ["rapid_fire"]


async def test_repeated_turns_by_hash_of_the_text(call: Call) -> None:
    await call.start()
    await call.send("turn.ended", 5, role="user", turn=1, text="Press one now")
    # The final text of a turn not otherwise reported: that turn's.
    answer = await call.send("transcript", 9, role="user", turn=2, text="press   ONE now")
    assert answer["flags"] == []
    answer = await call.send("turn.ended", 14, role="user", turn=3, text="Press one NOW")
    assert answer["flags"] == ["repeated_turns"]


async def test_one_sided_when_the_agent_barely_speaks(call: Call) -> None:
    await call.start()
    await call.send("turn.ended", 5, role="agent", words=20)
    answer = await call.send("turn.ended", 30, role="user", words=199)
    assert "one_sided" not in answer["flags"]
    answer = await call.send("turn.ended", 40, role="user", words=1)
    assert "one_sided" in answer["flags"]


async def test_silent_listener_trips_from_the_sweep(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    call = Call(http, base_url, account, "silent-1")
    call.started = now_ms() - 59_000
    await call.start()
    # The agent speaks now, by the call's clock and the edge's: the call's silence is due a second from
    # now, and its platform reports it on time, so the sweep ticks it then (`domain.calls.tick_after`).
    answer = await call.send("turn.started", 59, role="agent")
    assert answer["flags"] == []
    deadline = time.monotonic() + 8.0
    while time.monotonic() < deadline:
        record = await call.record()
        if "silent_listener" in record["flags"]:
            break
        await asyncio.sleep(0.2)
    assert record["flags"] == ["silent_listener"]
    assert "live_silent_listener" in record["reasons"]


async def test_silent_listener_on_an_event_a_minute_in(call: Call) -> None:
    await call.start()
    await call.send("turn.started", 2, role="agent")
    answer = await call.send("turn.ended", 59, role="agent", words=30)
    assert answer["flags"] == []
    answer = await call.send("turn.started", 61, role="agent")
    assert answer["flags"] == ["silent_listener"]


async def test_shuffled_turns_give_the_same_final_picture(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    script: list[tuple[str, float, dict[str, Any]]] = []
    for i in range(6):
        script += [
            ("turn.started", 10 + i * 12, {"role": "agent"}),
            ("turn.ended", 14 + i * 12, {"role": "agent", "words": 9}),
        ]
        script += [
            ("turn.started", 15 + i * 12, {"role": "user"}),
            ("turn.ended", 21 + i * 12, {"role": "user", "text": f"line {i % 2}"}),
        ]
    script += [("interruption", 30 + s, {}) for s in range(0, 12, 2)]
    pictures = []
    for order in ("in-order", "shuffled"):
        call = Call(http, base_url, account, f"shuffle-{order}")
        await call.start()
        events = list(script)
        if order == "shuffled":
            random.Random(7).shuffle(events)
        for kind, second, fields in events:
            await call.send(kind, second, **fields)
        record = await call.record()
        pictures.append(
            {
                k: record[k]
                for k in ("flags", "score", "spam_score", "user_turns", "agent_turns", "interruptions", "reasons")
            }
        )
    counts = ("user_turns", "agent_turns", "interruptions")
    assert [pictures[1][k] for k in counts] == [pictures[0][k] for k in counts] == [6, 6, 6]
    assert set(pictures[0]["flags"]) == {"repeated_turns", "barge_storm"}
    # A flag an earlier arrival tripped (a silence before the caller's late turns) stays, as a live score
    # stays up: the shuffled call holds every flag of the call in order, and may hold more.
    assert set(pictures[0]["flags"]) <= set(pictures[1]["flags"])
    assert pictures[1]["score"] >= pictures[0]["score"]


async def test_watch_plan_turns_are_dropped_unread(
    http: aiohttp.ClientSession, base_url: str, watch_account: AccountKeys
) -> None:
    call = Call(http, base_url, watch_account, "watch-turns")
    await call.start()
    answer = await call.turn("user", 1, 80)
    assert answer["ignored"] is True
    assert answer["why"] == "live_monitor_is_guard"
    assert answer["flags"] == [] and answer["user_turns"] == 0


async def test_invalid_role_and_unknown_call(call: Call) -> None:
    await call.start()
    assert await call.post(call.event("turn.started", 1, role="caller")) == (400, {"error": "invalid_role"})
    assert await call.post(call.event("turn.ended", 1)) == (400, {"error": "invalid_role"})
    assert (await call.post(call.event("interruption", 1)))[0] == 200
    assert await call.post({**call.event("turn.started", 1, role="user"), "call_id": "never"}) == (
        404,
        {"error": "unknown_call"},
    )
    assert await call.post(call.event("turn.started", 1, role="user", turn=-1)) == (
        400,
        {"error": "invalid_field", "field": "turn"},
    )
    assert await call.post(call.event("turn.ended", 1, role="user", chars="many")) == (
        400,
        {"error": "invalid_field", "field": "chars"},
    )


async def alert_records(service: RunningService, account_id: str) -> list[dict[str, Any]]:
    records = await read_topic(service.settings, service.settings.topic("alerts"))
    alerts = [orjson.loads(r.value) for r in records]
    return [a for a in alerts if a["account_id"] == account_id]


async def test_exactly_one_suspicious_alert_per_call(call: Call, service: RunningService, account: AccountKeys) -> None:
    await call.start()
    await call.turn("user", 1, 50)
    for i in range(8):
        await call.send("turn.started", 60 + i, role="user")
    for i in range(6):
        await call.send("interruption", 70 + i)
    record = await call.record()
    assert {"recording_likely", "rapid_fire", "barge_storm"} <= set(record["flags"])
    alerts = [a for a in await alert_records(service, account.account_id) if a["data"]["call_id"] == call.call_id]
    assert len(alerts) == 1
    alert = alerts[0]
    assert alert["type"] == "call.suspicious" and alert["severity"] == "critical"
    assert alert["id"].startswith("alrt_") and len(alert["id"]) == 25
    assert alert["data"]["flags"][0] == "recording_likely"
    assert alert["data"]["seconds"] == 50
    assert set(alert["data"]) >= {"number", "caller", "call_id", "flags", "score", "seconds"}


async def test_quiet_calls_raise_no_suspicious_alert(call: Call, service: RunningService, account: AccountKeys) -> None:
    await call.start(quiet=True)
    answer = await call.turn("user", 1, 50)
    assert answer["flags"] == ["recording_likely"]
    assert [a for a in await alert_records(service, account.account_id) if a["data"]["call_id"] == call.call_id] == []


async def test_turn_text_never_leaves_the_edge(call: Call, service: RunningService, account: AccountKeys) -> None:
    canary = "zebracanary" + str(random.Random().randrange(10**9))
    await call.start()
    await call.send("turn.ended", 3, role="user", text=f"my secret is {canary} ok")
    await call.send("transcript", 4, role="agent", text=f"{canary} noted")
    status, _ = await call.post({"type": "call.ended", "call_id": call.call_id, "at": format_ms(call.started + 9000)})
    assert status == 200
    needle = canary.encode()
    topics = await topic_names(service.settings)
    scanned = 0
    # Every topic this service writes carries its prefix (its changelogs too, through its app id); the
    # broker also holds the other tests' topics.
    for topic in (t for t in topics if t.startswith(service.settings.topic_prefix)):
        for record in await read_topic(service.settings, topic):
            scanned += 1
            assert needle not in (record.value or b"") and needle not in (record.key or b""), topic
            assert all(needle not in (value or b"") for _, value in record.headers), topic
    assert scanned > 0
    for path in Path(service.data_dir).parent.rglob("*"):
        if path.is_file():
            assert needle not in path.read_bytes(), path
