"""One account's flood of listings waits behind its own questions at the worker, never another account's:
accounts take turns at the read agent, one question each, and past its share an account's questions are
refused at once (processors/folds/queries.py, `Waiting`).

Before, questions were answered in arrival order: with the read agent's loop share small enough that the
worker answered fewer questions than a looping flood asked, every question waited behind the flood's
until the edge's 2 s deadline, and the other account's reads were answered 503."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator

import aiohttp
import pytest

from infra.kafka import make_consumer, partitions
from infra.settings import Settings
from tests.service import RunningService, create_account, running_service
from tests.test_calls import get, post, start

pytestmark = pytest.mark.pipeline

# A fiftieth of the loop for answers: each answer waits out fifty times its cost, so the flood's questions
# take many seconds to answer one after the other.
LOOP_SHARE = "0.02"
FLOOD_CLIENTS = 64
WAITING_PER_ACCOUNT = 64


@pytest.fixture(scope="module")
def slow_reads(kafka: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    env = {
        "CALLSCREEN_QUERY_LOOP_SHARE": LOOP_SHARE,
        "CALLSCREEN_QUERY_WAITING_PER_ACCOUNT": str(WAITING_PER_ACCOUNT),
    }
    with running_service(tmp_path_factory.mktemp("read-turns") / "data", kafka, env=env) as running:
        yield running


async def questions_asked(settings: Settings) -> int:
    """How many questions the edges have put on the queries topic."""
    consumer = make_consumer(settings)
    await consumer.start()
    try:
        topic = settings.topic("queries")
        return sum((await consumer.end_offsets(await partitions(consumer, topic))).values())
    finally:
        await consumer.stop()


@pytest.mark.timeout(120)
async def test_another_accounts_read_is_answered_through_one_accounts_listing_flood(
    slow_reads: RunningService, http: aiohttp.ClientSession
) -> None:
    service = slow_reads
    flooder = await create_account(service.settings, http, service.base_url)
    quiet = await create_account(service.settings, http, service.base_url)
    for n in range(20):
        status, _ = await post(http, service.base_url, flooder, start(f"flood-{n}", **{"from": f"+1646770{n:04d}"}))
        assert status == 200
    status, _ = await post(http, service.base_url, quiet, start("quiet-call"))
    assert status == 200

    flood_statuses: Counter[int] = Counter()
    quiet_done = asyncio.Event()
    before = await questions_asked(service.settings)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as flood_http:

        async def looping() -> None:
            # Each listing asks every one of the worker's partitions a question; asked again once answered.
            while not quiet_done.is_set():
                status, _ = await get(flood_http, f"{service.base_url}/v1/calls?limit=200", flooder)
                flood_statuses[status] += 1

        flood = [asyncio.create_task(looping()) for _ in range(FLOOD_CLIENTS)]
        try:
            while await questions_asked(service.settings) < before + 2 * FLOOD_CLIENTS * service.settings.partitions:
                assert not any(task.done() for task in flood), flood_statuses
            # The flood's questions are on the log ahead of the quiet account's, and more keep coming.
            quiet_reads = [await get(http, f"{service.base_url}/v1/calls/quiet-call", quiet) for _ in range(10)]
        finally:
            quiet_done.set()
            await asyncio.gather(*flood)

    assert [(status, body.get("call_id")) for status, body in quiet_reads] == [(200, "quiet-call")] * 10
    # The flood filled its own share: its questions past it were refused, not queued ahead of anyone (and
    # past its key's read limit, refused at the edge).
    assert set(flood_statuses) <= {200, 429, 503} and flood_statuses[503] > 0, flood_statuses
