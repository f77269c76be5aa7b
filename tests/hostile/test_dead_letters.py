"""Per-record isolation: a record no fold can handle is set aside on the dead_letters topic with its
reason, acknowledged, and counted; the worker stays up and the partition's next event is answered.

On the old code the first such record crashed the worker, and every restart crashed on it again.
"""

from __future__ import annotations

from collections.abc import Iterator

import aiohttp
import orjson
import pytest

from domain import keys
from infra.kafka import make_producer, partition_for
from infra.ports import free_port_block
from tests.service import RunningService, create_account, start_service
from tests.topics import read_topic

START = {"type": "call.started", "to": "+14155552671", "from": "+12125550123"}


@pytest.fixture(scope="module")
def service(kafka: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    """A service of its own: the records written here are on its topics only, and its worker 0 serves
    Prometheus on a port of its own."""
    env = {"CALLSCREEN_METRICS_PORT": str(free_port_block(2))}
    running = start_service(tmp_path_factory.mktemp("dead-letters") / "data", kafka, env=env)
    yield running
    running.stop()


async def test_a_record_no_fold_can_handle_is_set_aside_and_the_partition_goes_on(
    service: RunningService, http: aiohttp.ClientSession
) -> None:
    settings = service.settings
    account = await create_account(settings, http, service.base_url)
    key = keys.call(account.account_id, "after-dead-letter")
    partition = partition_for(key, settings.partitions)
    producer = make_producer(settings)
    await producer.start()
    try:
        # A producer that is not the edge writes what no fold reads, on the partition of the next call.
        for value in (b"not json at all", orjson.dumps({"type": "call.started", "call_id": 7})):
            await producer.send_and_wait(settings.topic("events"), value, key=key.encode(), partition=partition)
    finally:
        await producer.stop()
    async with http.post(
        f"{service.base_url}/v1/events", json={**START, "call_id": "after-dead-letter"}, headers=account.headers
    ) as r:
        assert r.status == 200, await r.text()
    letters = [orjson.loads(r.value) for r in await read_topic(settings, settings.topic("dead_letters"))]
    ours = [
        letter for letter in letters if letter["topic"] == settings.topic("events") and letter["partition"] == partition
    ]
    assert [letter["reason"].split(":")[0] for letter in ours[-2:]] == ["DecodeError", "ValidationError"]
    assert all(set(letter) == {"kind", "topic", "partition", "offset", "reason", "at"} for letter in ours)
    async with http.get(f"http://127.0.0.1:{settings.metrics_port}/metrics") as r:
        text = await r.text()
    counted = [line for line in text.splitlines() if line.startswith('callscreen_dead_letters_total{topic="events"}')]
    assert counted and float(counted[0].split()[-1]) >= 2
    async with http.get(f"{service.base_url}/healthz") as r:
        assert r.status == 200
