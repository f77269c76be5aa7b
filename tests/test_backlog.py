"""A backlog bigger than an agent's buffer: the worker folds it at its own pace and every answer is exact.

Records are appended straight to the events topic, as the edge writes them, faster than a worker folds
them. Each start waits until the detector has folded the facts of the starts before it on the same
number (docs/architecture.md, "The feature view and the barrier"); the detector's records must keep
coming while the events agent's buffer is full (docs/architecture.md, "Backlogs").
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import pytest

from domain import keys
from domain.rules import LimitRules
from domain.times import format_ms
from domain.validation import Stamp, TimeBounds, parse_event
from infra.clock import now_ms
from infra.kafka import make_producer, partition_for
from infra.settings import Settings
from tests.service import AccountKeys, RunningService, create_account, running_service, settled

NUMBER = "+14155552671"
MIN = 60_000
# A buffer of 100 records per agent, so a backlog of a few hundred is bigger than it.
SMALL_BUFFER = {"CALLSCREEN_WORKER_STREAM_BUFFER": "100"}
FILLERS = 400


@pytest.fixture
def small_buffer_service(kafka: str, tmp_path: Path) -> Iterator[RunningService]:
    with running_service(tmp_path / "data", kafka, env=SMALL_BUFFER) as running:
        yield running


def started(call_id: str, caller: str, at: int) -> dict[str, Any]:
    return {"type": "call.started", "call_id": call_id, "to": NUMBER, "from": caller, "at": format_ms(at)}


def as_appended(account: AccountKeys, body: dict[str, Any]) -> tuple[bytes, bytes]:
    """An event body as the edge appends it: its key and its record."""
    stamp = Stamp(uuid.uuid4().hex, account.account_id, account.plan, now_ms())
    event = parse_event(body, stamp, TimeBounds.of(LimitRules()))
    return keys.call(account.account_id, body["call_id"]).encode(), msgspec.json.encode(event)


def same_partition(account: AccountKeys, partitions: int, count: int) -> list[str]:
    """`count` call ids whose events go to one partition of the events topic."""

    def partition(call_id: str) -> int:
        return partition_for(keys.call(account.account_id, call_id), partitions)

    ids = (f"w{n}" for n in itertools.count())
    return list(itertools.islice((i for i in ids if partition(i) == partition("w0")), count))


async def append(settings: Settings, records: list[tuple[bytes, bytes]]) -> None:
    producer = make_producer(settings)
    await producer.start()
    try:
        acks = [await producer.send(settings.topic("events"), value, key=key) for key, value in records]
        await asyncio.gather(*acks)
    finally:
        await producer.stop()


async def recorded_answer(http: aiohttp.ClientSession, service: RunningService, account: AccountKeys, body: Any) -> Any:
    """A start's answer as the log recorded it: the same start sent again gets it back (`duplicate`)."""
    async with http.post(f"{service.base_url}/v1/events", json=body, headers=account.headers) as response:
        assert response.status == 200, await response.text()
        answer = await response.json()
    assert answer["duplicate"] is True
    return answer


@pytest.mark.timeout(180)  # a hang guard: a stalled consumer folds one start a second
async def test_a_backlog_bigger_than_the_buffer_folds_without_a_stall(
    small_buffer_service: RunningService, http: aiohttp.ClientSession
) -> None:
    service, settings = small_buffer_service, small_buffer_service.settings
    busy = await create_account(settings, http, service.base_url)
    watched = await create_account(settings, http, service.base_url)
    base = now_ms() - 3_600_000
    # Many callers to one number: every start of `busy` waits for the detector's fold of the one before.
    records = [as_appended(busy, started(f"f{i}", f"+1646{2_000_000 + i:07d}", base + i)) for i in range(FILLERS)]
    # One caller, seven calls in seven minutes, behind half the backlog: the sixth is over the rate and the
    # detector blocks the caller before the seventh. The calls share a partition, so they are folded in the
    # order they were sent, as a client that waits for each answer would have them.
    caller = "+16465550100"
    bodies = []
    for n, call_id in enumerate(same_partition(watched, settings.partitions, 7)):
        body = started(call_id, caller, base + n * MIN)
        bodies.append(body)
        records.insert(FILLERS // 2 + n * 10, as_appended(watched, body))
    await append(settings, records)
    await settled(settings, timeout_s=120)

    answers = [await recorded_answer(http, service, watched, body) for body in bodies]
    assert [a["action"] for a in answers[:5]] == ["allow"] * 5
    assert "rate_exceeded" in answers[5]["reasons"]
    assert (answers[6]["action"], answers[6]["reasons"]) == ("reject", ["blocked"])
    assert answers[6]["block"]["reason"] == "caller.rate_exceeded"
    log = (service.data_dir.parent / f"{service.data_dir.name}.log").read_text()
    assert "detector behind a fact this worker appended" not in log
