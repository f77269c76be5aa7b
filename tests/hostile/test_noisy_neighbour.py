"""A noisy neighbour: one account floods alerts toward a receiver that hangs for the whole 8 s time-out,
and another account's alerts still arrive at once (docs/api.md, Alert delivery)."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import trustme

from domain.times import format_ms, parse_ms
from infra.clock import now_ms
from tests.receiver import Receiver, receiver_env
from tests.service import AccountKeys, RunningService, create_account, running_service
from tests.test_webhooks import until, use_hook
from tests.topics import read_topic

TO = "+14155552671"
PER_MINUTE = 20
ACCOUNT_SLOTS = 4
# Rate alerts the flooding account raises (each takes six calls from one caller).
FLOOD = 30
PROBES = 10


@pytest.fixture(scope="module")
def noisy_service(
    kafka: str, tmp_path_factory: pytest.TempPathFactory, webhook_ca: tuple[trustme.CA, Path]
) -> Iterator[RunningService]:
    env = {
        **receiver_env(webhook_ca[1]),
        "CALLSCREEN_ALERTS_PER_MINUTE": str(PER_MINUTE),
        "CALLSCREEN_WEBHOOK_ACCOUNT_CONCURRENCY": str(ACCOUNT_SLOTS),
    }
    with running_service(tmp_path_factory.mktemp("noisy") / "data", kafka, env=env) as running:
        yield running


async def post(http: aiohttp.ClientSession, service: RunningService, account: AccountKeys, body: Any) -> Any:
    async with http.post(f"{service.base_url}/v1/events", json=body, headers=account.headers) as r:
        assert r.status == 200, await r.text()
        return await r.json()


async def flood(http: aiohttp.ClientSession, service: RunningService, account: AccountKeys) -> None:
    """FLOOD callers each calling six times within a minute: one caller.rate_exceeded each (and whatever
    else the detectors make of it)."""
    base = now_ms() - 120_000
    for n in range(FLOOD):
        caller = f"+4479115{n:05d}"
        for i in range(6):
            at = format_ms(base + n * 100 + i * 10)
            body = {"type": "call.started", "call_id": f"flood-{n}-{i}", "to": TO, "from": caller, "at": at}
            await post(http, service, account, body)


async def probe(
    http: aiohttp.ClientSession, service: RunningService, account: AccountKeys, receiver: Receiver, n: int
) -> float:
    """Raise one call.suspicious (a 49 s caller turn: recording_likely) and return the seconds from sending
    the event that raises it until the receiver has the alert."""
    call_id = f"probe-{n}"
    started = now_ms() - 60_000
    start = {"type": "call.started", "call_id": call_id, "to": TO, "from": f"+1646555{n:04d}"}
    await post(http, service, account, {**start, "at": format_ms(started)})
    turn = {"type": "turn.started", "call_id": call_id, "role": "user", "at": format_ms(started + 1000)}
    await post(http, service, account, turn)
    raised = time.monotonic()
    answer = await post(
        http,
        service,
        account,
        {"type": "turn.ended", "call_id": call_id, "role": "user", "at": format_ms(started + 50_000)},
    )
    assert answer["flags"] == ["recording_likely"]
    prefix = f"/ok/{account.account_id}"

    def arrival() -> float | None:
        for r in receiver.received:
            alert = orjson.loads(r.body)
            # The probes' consecutive callers raise caller alerts about the same calls: only this one counts.
            if r.path.startswith(prefix) and alert["type"] == "call.suspicious" and alert["data"]["call_id"] == call_id:
                return r.at
        return None

    async def arrived() -> bool:
        return arrival() is not None

    await until(arrived, 10)
    at = arrival()
    assert at is not None
    return at - raised


def p99(samples: list[float]) -> float:
    """Nearest-rank 99th percentile."""
    ordered = sorted(samples)
    return ordered[math.ceil(0.99 * len(ordered)) - 1]


async def alerts_of(service: RunningService, account: AccountKeys) -> dict[str, dict[str, Any]]:
    """The account's alerts on the alerts topic, by id (a refold may append an alert twice)."""
    records = [orjson.loads(r.value) for r in await read_topic(service.settings, service.settings.topic("alerts"))]
    return {a["id"]: a for a in records if a["account_id"] == account.account_id}


async def skipped(service: RunningService, account: AccountKeys, reason: str) -> set[str]:
    records = [orjson.loads(r.value) for r in await read_topic(service.settings, service.settings.topic("deliveries"))]
    return {
        r["alert_id"]
        for r in records
        if r["account_id"] == account.account_id and r["kind"] == "delivery.skipped" and r["reason"] == reason
    }


@pytest.mark.timeout(180)
async def test_a_flood_toward_a_hanging_receiver_delays_no_other_account(
    noisy_service: RunningService,
    module_receiver: Receiver,
    http: aiohttp.ClientSession,
    record_property: Callable[[str, object], None],
) -> None:
    noisy = await create_account(noisy_service.settings, http, noisy_service.base_url)
    quiet = await create_account(noisy_service.settings, http, noisy_service.base_url)
    await use_hook(http, noisy_service, noisy, f"{module_receiver.url}/hang/{noisy.account_id}")
    await use_hook(http, noisy_service, quiet, f"{module_receiver.url}/ok/{quiet.account_id}")
    await flood(http, noisy_service, noisy)
    hanging = f"/hang/{noisy.account_id}"

    async def noisy_arrived() -> bool:
        return any(r.path.startswith(hanging) for r in module_receiver.received)

    await until(noisy_arrived, 10)
    first = min(r.at for r in module_receiver.received if r.path.startswith(hanging))

    latencies = [await probe(http, noisy_service, quiet, module_receiver, n) for n in range(PROBES)]
    # Reported with -s (and as properties in --junitxml): with 10 probes the nearest-rank p99 is the maximum.
    shown = [round(s, 3) for s in latencies]
    median, worst = statistics.median(latencies), p99(latencies)
    record_property("probe_latencies_s", shown)
    record_property("probe_p99_s", round(worst, 3))
    print(f"\nprobes, s: {shown}; max {max(latencies):.3f}, median {median:.3f}, p99 {worst:.3f}")
    assert p99(latencies) < 2.0, latencies

    # The flood holds its own account's slots and no more: until the first of its POSTs times out, exactly
    # as many reached its receiver as one account may have in flight.
    async def first_round_over() -> bool:
        return time.monotonic() > first + 7.0

    await until(first_round_over, 10)
    assert (
        len([r for r in module_receiver.received if r.path.startswith(hanging) and r.at < first + 7.0]) == ACCOUNT_SLOTS
    )

    # Past its alerts per minute (counted by created_at) the rest were recorded rate_limited, never sent.
    async def all_limited() -> bool:
        raised = await alerts_of(noisy_service, noisy)
        return len(await skipped(noisy_service, noisy, "rate_limited")) == len(raised) - PER_MINUTE

    await until(all_limited, 20)
    raised = await alerts_of(noisy_service, noisy)
    created = sorted(parse_ms(a["created_at"]) or 0 for a in raised.values())
    assert len(raised) > PER_MINUTE and created[-1] - created[0] < 60_000
    limited = await skipped(noisy_service, noisy, "rate_limited")
    sent = {orjson.loads(r.body)["id"] for r in module_receiver.received if r.path.startswith(hanging)}
    assert limited <= set(raised) and not limited & sent
    async with http.get(f"{noisy_service.base_url}/v1/alerts/{min(limited)}", headers=noisy.headers) as r:
        shown = await r.json()
    assert (shown["delivered"], shown["delivery"]) == ({"webhook": False}, None)
