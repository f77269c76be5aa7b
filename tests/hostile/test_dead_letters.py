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
from tests.service import RunningService, create_account, running_service
from tests.topics import read_topic

START = {"type": "call.started", "to": "+14155552671", "from": "+12125550123"}
# Under the bound a plain call's row fits (about 1 KB) and a call with the largest legal attrs (about
# 3.6 KB) does not: the over-bound path, which no legal event reaches at the default 512 KiB.
VALUE_BOUND = 2560
LONGEST_ATTRS = {"caller_name": "n" * 128, "carrier": "k" * 128, "geo": {"city": "c" * 128}, "unknown": "u" * 2000}


@pytest.fixture(scope="module")
def service(kafka: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    """A service of its own: the records written here are on its topics only, and its worker 0 serves
    Prometheus on a port of its own."""
    env = {"CALLSCREEN_METRICS_PORT": str(free_port_block(2)), "CALLSCREEN_MAX_VALUE_BYTES": str(VALUE_BOUND)}
    with running_service(tmp_path_factory.mktemp("dead-letters") / "data", kafka, env=env) as running:
        yield running


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


async def test_an_event_whose_row_would_pass_the_bound_is_answered_422_set_aside_and_the_partition_goes_on(
    service: RunningService, http: aiohttp.ClientSession
) -> None:
    """Without the 422 the client waited out the 2 s deadline for a 503, and so did every retry (checked by
    taking the answer out: 503 `unavailable`)."""
    settings = service.settings
    account = await create_account(settings, http, service.base_url)
    big = {**START, "call_id": "too-big", "attrs": LONGEST_ATTRS}
    for _ in range(2):  # a retry folds it again and gets the same answer
        async with http.post(f"{service.base_url}/v1/events", json=big, headers=account.headers) as r:
            assert (r.status, await r.json()) == (422, {"error": "unprocessable", "reason": "value_too_large"})
    same_partition = next(
        call_id
        for call_id in (f"after-big-{n}" for n in range(100))
        if partition_for(keys.call(account.account_id, call_id), settings.partitions)
        == partition_for(keys.call(account.account_id, "too-big"), settings.partitions)
    )
    async with http.post(
        f"{service.base_url}/v1/events", json={**START, "call_id": same_partition}, headers=account.headers
    ) as r:
        assert r.status == 200, await r.text()
    async with http.get(f"{service.base_url}/v1/calls/too-big", headers=account.headers) as r:
        assert (r.status, await r.json()) == (404, {"error": "not_found"})
    letters = [orjson.loads(r.value) for r in await read_topic(settings, settings.topic("dead_letters"))]
    too_large = [letter for letter in letters if letter["reason"].startswith("ValueTooLarge: calls value of ")]
    assert len(too_large) == 2
