"""A burst within one account's rate limit puts at most its turns of events (`events_in_flight_per_account`,
2) in the log ahead of another account's next event; the rest wait at the edge (decision 0037).

The worker folds each partition in log order, so before the turns every event of the burst was ahead of
the other account's, which waited for all of them (bench/isolation.py's busy neighbour: p99 583 ms against
26 ms quiet). The worker is stopped while the burst comes, so what the edge appended ahead of the other
account's event is read off the log, not timed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid

import aiohttp
import orjson
import pytest
from aiokafka import ConsumerRecord

from tests.service import AccountKeys, RunningService, create_account, role_pids
from tests.test_webhooks import until
from tests.topics import read_topic

pytestmark = pytest.mark.pipeline

TURNS = 2  # the default of `events_in_flight_per_account`
BURST = 8


async def start(
    http: aiohttp.ClientSession, service: RunningService, account: AccountKeys, call_id: str
) -> tuple[int, str | None]:
    body = {"type": "call.started", "call_id": call_id, "to": "+14155550191", "from": "+12125550187"}
    async with http.post(f"{service.base_url}/v1/events", json=body, headers=account.headers) as r:
        await r.read()
        return r.status, r.headers.get("Retry-After")


async def test_a_burst_puts_only_its_turns_ahead_of_another_accounts_event(
    service: RunningService, http: aiohttp.ClientSession
) -> None:
    busy = await create_account(service.settings, http, service.base_url)
    other = await create_account(service.settings, http, service.base_url)
    tag = uuid.uuid4().hex[:8]
    topic = service.settings.topic("events")

    async def logged() -> dict[str, ConsumerRecord[bytes, bytes]]:
        found = {}
        for record in await read_topic(service.settings, topic):
            call_id = orjson.loads(record.value).get("call_id", "")
            if call_id.startswith(tag):
                found[call_id] = record
        return found

    workers = role_pids(service, "worker")
    assert workers
    for pid in workers:
        os.kill(pid, signal.SIGSTOP)
    try:
        burst = [asyncio.create_task(start(http, service, busy, f"{tag}-busy-{n}")) for n in range(BURST)]

        async def turns_taken() -> bool:
            return len(await logged()) >= TURNS

        await until(turns_taken, 10.0)
        witness = asyncio.create_task(start(http, service, other, f"{tag}-other"))

        async def witness_logged() -> bool:
            return f"{tag}-other" in await logged()

        await until(witness_logged, 10.0)
        ahead = await logged()
    finally:
        for pid in workers:
            os.kill(pid, signal.SIGCONT)
    answers = await asyncio.gather(*burst, witness)

    at = ahead[f"{tag}-other"].timestamp
    busy_ahead = sorted(c for c, r in ahead.items() if "-busy-" in c and r.timestamp <= at)
    assert len(busy_ahead) == TURNS, busy_ahead
    # Nothing is lost: an event that never had its turn is a 503 to retry; every other answer is a 200, or
    # the answer deadline's 503 for an event that is in the log.
    assert {status for status, _ in answers} <= {200, 503}
    assert all(retry == "1" for status, retry in answers if status == 503)
    in_log = await logged()
    for n, (status, _) in enumerate(answers[:BURST]):
        if status == 200:
            assert f"{tag}-busy-{n}" in in_log
