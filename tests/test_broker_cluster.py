"""The service on a three-broker Apache Kafka cluster (tests/cluster.py): replication factor 3 and
min.insync.replicas 2 for every topic it makes, and a broker SIGKILLed under load.

Starts stream in at a steady rate (`RATE` a second, each its own call, over 20 protected numbers of each
of `ACCOUNTS` accounts) from `BASELINE_S` before the first kill (the baseline) to the end. Each kill takes
a broker down without a controlled shutdown (the first: the leader of the events topic's partition 0;
later ones go round the leaders of the other partitions, the group coordinator among them when it leads
one), posting goes on for `WINDOW_S`, the broker starts again on its own log, and it must rejoin the ISR
of every partition. Then:

- every start the edge acknowledged (2xx) reads back 200 by id with the score and action it was answered
  with: nothing acknowledged is lost;
- the edge answers 200 again after every kill, with the broker still down (two of three replicas take
  every write);
- every partition's ISR holds all three brokers after every restart.

Speed is not asserted (the project's rule for `make test`): the answers' p99 in the window after each kill,
the time to the first 200 after it and the 503s are recorded, printed (`-s`) and written to
data/test-reports/broker-kills.json. CALLSCREEN_TEST_BROKER_KILLS kills (default 1); `make faults` runs 50.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.cluster import KafkaCluster, running_cluster
from tests.service import AccountKeys, RunningService, create_account, running_service, settled, wait_for_status
from tests.traffic import NO_SWEEP

pytestmark = [pytest.mark.pipeline, pytest.mark.slow, pytest.mark.faults, pytest.mark.last]

KILLS = int(os.environ.get("CALLSCREEN_TEST_BROKER_KILLS", "1"))
# Seconds of posting after each kill before the broker starts again: the window the p99 is taken over.
# `make faults` takes the 30 s; the short form in `make test` proves the same things in 15.
WINDOW_S = float(os.environ.get("CALLSCREEN_TEST_BROKER_KILL_WINDOW_S", "15"))
# Starts a second. At 50 the service on three brokers sharing two cores was past its capacity before any
# kill (most answers 503 in the baseline), which leaves nothing for a kill to show; at 20 it keeps up.
RATE = float(os.environ.get("CALLSCREEN_TEST_BROKER_RATE", "20"))
BASELINE_S = 6.0
# How much longer than the window a busy machine may take to answer 200 with the broker down.
RECOVERY_GRACE_S = 60.0
# The bound the issue names for answers after a kill: recorded, never asserted.
P99_TARGET_MS = 50.0
# Starts spread over accounts and their protected numbers (within the plan's cap): a start on a number
# waits until the detector folded the last fact about it (processors/state/mirror.py), so one number takes
# its starts in turn. A number's detector window is one row rewritten with every fact about it, which grows
# with the number's calls in the last hour (some 63 KB at one call a second, docs/hostile-runs.md): 20/s on
# 20 numbers for the 45 minutes of `make faults` made every number that hot, and past the 25th kill the
# two cores could no longer keep up. Ten accounts make it 200 numbers at one call in ten seconds each.
ACCOUNTS = int(os.environ.get("CALLSCREEN_TEST_BROKER_ACCOUNTS", "10"))
NUMBERS = [f"+1415555{2600 + i:04d}" for i in range(20)]
REPORT = Path(__file__).resolve().parent.parent / "data" / "test-reports" / "broker-kills.json"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with running_cluster(tmp_path_factory.mktemp("cluster")) as started:
        yield started


@pytest.fixture(scope="module")
def cluster_service(cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    env = {
        "CALLSCREEN_REPLICATION_FACTOR": "3",
        "CALLSCREEN_MIN_INSYNC_REPLICAS": "2",
        # Each account's load is past the default limits and allowance over 50 kills.
        "CALLSCREEN_EVENTS_PER_MINUTE": "1000000",
        "CALLSCREEN_READS_PER_MINUTE": "1000000",
        "CALLSCREEN_ACCOUNT_READS_PER_MINUTE": "1000000",
        "CALLSCREEN_GUARD_DAILY_STARTS": "10000000",
        **NO_SWEEP,
    }
    with running_service(tmp_path_factory.mktemp("cluster-service") / "data", cluster.url, env=env) as running:
        yield running


@dataclass
class Sent:
    call_id: str
    sent: float  # monotonic
    account: AccountKeys
    status: int = 0  # 0: no answer (a client timeout or a broken connection)
    latency_ms: float = math.nan
    answer: dict[str, Any] = field(default_factory=dict)


class Load:
    """`call.started` at `RATE` a second, each its own task so a slow answer holds back no other."""

    def __init__(self, http: aiohttp.ClientSession, base_url: str, accounts: list[AccountKeys]) -> None:
        self.http, self.base_url, self.accounts = http, base_url, accounts
        self.sent: list[Sent] = []
        self.tasks: set[asyncio.Task[None]] = set()
        self.stopping = False

    async def run(self) -> None:
        started = time.monotonic()
        n = 0
        while not self.stopping:
            n += 1
            record = Sent(f"bk-{n}", time.monotonic(), self.accounts[n % len(self.accounts)])
            self.sent.append(record)
            task = asyncio.create_task(self.post(record, n))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
            await asyncio.sleep(max(0.0, started + n / RATE - time.monotonic()))

    async def post(self, record: Sent, n: int) -> None:
        body = {
            "type": "call.started",
            "call_id": record.call_id,
            "to": NUMBERS[n // len(self.accounts) % len(NUMBERS)],
            "from": f"+1646{n % 10**7:07d}",
        }
        try:
            async with self.http.post(f"{self.base_url}/v1/events", json=body, headers=record.account.headers) as r:
                record.status = r.status
                if r.status == 200:
                    record.answer = await r.json()
                else:
                    await r.read()
        except (aiohttp.ClientError, TimeoutError):
            record.status = 0
        record.latency_ms = (time.monotonic() - record.sent) * 1000

    async def drain(self) -> None:
        self.stopping = True
        if self.tasks:
            await asyncio.wait(set(self.tasks), timeout=30)


def p99(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)], 1)


def window_figures(load: Load, killed_at: float) -> dict[str, Any]:
    """The answers to starts sent in the `WINDOW_S` after a kill: p99 overall and per 5 s, and recovery."""
    window = [s for s in load.sent if killed_at <= s.sent < killed_at + WINDOW_S]
    ok = [s for s in window if s.status == 200]
    # Past the window too: the broker stays down until a start sent after the kill answered 200.
    later = [s for s in load.sent if s.sent >= killed_at and s.status == 200]
    first_ok = min((s.sent + s.latency_ms / 1000 - killed_at for s in later), default=None)
    slices = {}
    for begin in range(0, int(WINDOW_S), 5):
        part = [s.latency_ms for s in ok if begin <= s.sent - killed_at < begin + 5]
        slices[f"{begin}-{begin + 5}s"] = p99(part)
    # The first second from which every later second's p99 stays under the target, within the window.
    per_second = [
        p99([s.latency_ms for s in ok if second <= s.sent - killed_at < second + 1]) for second in range(int(WINDOW_S))
    ]
    recovered = None
    for second in range(len(per_second) - 1, -1, -1):
        figure = per_second[second]
        if figure is None or figure >= P99_TARGET_MS:
            break
        recovered = second
    return {
        "sent": len(window),
        "ok": len(ok),
        "503": sum(1 for s in window if s.status == 503),
        "no_answer": sum(1 for s in window if s.status == 0),
        "p99_ms": p99([s.latency_ms for s in ok]),
        "max_ms": round(max((s.latency_ms for s in ok), default=0.0), 1),
        "p99_ms_by_5s": slices,
        "first_200_after_s": round(first_ok, 2) if first_ok is not None else None,
        "p99_under_target_from_s": recovered,
    }


def by_second(load: Load, since: float) -> dict[int, dict[int, int]]:
    """The statuses of the starts sent in each second from `since` on: what a failure message shows."""
    seconds: dict[int, dict[int, int]] = {}
    for s in load.sent:
        if s.sent >= since:
            counts = seconds.setdefault(int(s.sent - since), {})
            counts[s.status] = counts.get(s.status, 0) + 1
    return seconds


@pytest.fixture
async def load_session() -> AsyncIterator[aiohttp.ClientSession]:
    # More connections than the answers in flight while a partition has no leader (seconds each).
    connector = aiohttp.TCPConnector(limit=400)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=15)) as session:
        yield session


# A hang guard: each kill costs a window, a restart and a rejoin.
@pytest.mark.timeout(300 + KILLS * (WINDOW_S + RECOVERY_GRACE_S + 150))
async def test_a_broker_killed_under_load_loses_nothing_acknowledged_and_rejoins(
    cluster: KafkaCluster, cluster_service: RunningService, load_session: aiohttp.ClientSession
) -> None:
    http, base_url, settings = load_session, cluster_service.base_url, cluster_service.settings
    # Every topic the service made (its changelogs too) has three replicas (and min.insync.replicas 2 from its env).
    prefix = settings.topic_prefix
    parts = await cluster.partitions()
    own = {k: v for k, v in parts.items() if k[0].startswith(prefix)}
    assert own and all(len(v["replicas"]) == 3 for v in own.values()), own
    assert all(len(v["replicas"]) == 3 for k, v in parts.items() if k[0] == "__consumer_offsets")
    await cluster.until_fully_replicated()

    accounts = [await create_account(settings, http, base_url) for _ in range(ACCOUNTS)]
    load = Load(http, base_url, accounts)
    runner = asyncio.create_task(load.run())
    kills: list[dict[str, Any]] = []
    try:
        await asyncio.sleep(BASELINE_S)  # a steady state before the first kill, its answers the baseline
        assert any(s.status == 200 for s in load.sent), by_second(load, load.sent[0].sent)
        begun = load.sent[0].sent
        settled_load = [s for s in load.sent if s.sent >= begun + BASELINE_S / 2]
        baseline = {
            "sent": len(settled_load),
            "503": sum(1 for s in settled_load if s.status == 503),
            "p99_ms": p99([s.latency_ms for s in settled_load if s.status == 200]),
        }
        events = settings.topic("events")
        for k in range(KILLS):
            parts = await cluster.partitions()
            partition = k % settings.partitions
            victim = parts[(events, partition)]["leader"]
            # What else the victim was: the group coordinator of every consumer group (one offsets partition).
            coordinator = parts[("__consumer_offsets", 0)]["leader"] == victim
            killed_at = time.monotonic()
            cluster.kill(victim)
            await asyncio.sleep(WINDOW_S)
            # Two brokers of three take every write (min.insync.replicas 2): the edge answers 200 again before
            # the killed one is back. Past the window only on a machine too busy to recover within it.
            while not any(s.status == 200 for s in load.sent if s.sent >= killed_at):
                assert time.monotonic() < killed_at + WINDOW_S + RECOVERY_GRACE_S, (
                    f"no start answered 200 while broker {victim} was down: {by_second(load, killed_at)}"
                )
                await asyncio.sleep(0.5)
            assert not runner.done()
            figures = window_figures(load, killed_at)
            restarted_at = time.monotonic()
            cluster.restart(victim)
            rejoined_s = await cluster.until_fully_replicated(timeout_s=120)
            await wait_for_status(http, "GET", f"{base_url}/healthz", 200, timeout_s=30)
            figures.update(
                kill=k + 1,
                broker=victim,
                events_partition=partition,
                group_coordinator=coordinator,
                rejoined_isr_s=round(time.monotonic() - restarted_at, 1),
                isr_wait_s=round(rejoined_s, 1),
            )
            kills.append(figures)
            print(f"\nkill {k + 1}/{KILLS}: {json.dumps(figures)}")
        await asyncio.sleep(3)  # answers after the last rejoin too
    finally:
        await load.drain()
        runner.cancel()

    acknowledged = [s for s in load.sent if s.status == 200]
    await settled(settings, timeout_s=90)
    lost: list[str] = []
    changed: list[tuple[str, Any, Any]] = []
    reads = asyncio.Semaphore(20)

    async def read_back(s: Sent) -> None:
        async with reads, http.get(f"{base_url}/v1/calls/{s.call_id}", headers=s.account.headers) as r:
            if r.status != 200:
                lost.append(s.call_id)
                return
            call = await r.json()
        if (call["score"], call["action"]) != (s.answer["score"], s.answer["action"]):
            changed.append((s.call_id, (s.answer["score"], s.answer["action"]), (call["score"], call["action"])))

    await asyncio.gather(*(read_back(s) for s in acknowledged))
    all_ok = [s.latency_ms for s in acknowledged]
    report = {
        "kills": KILLS,
        "window_s": WINDOW_S,
        "rate_per_s": RATE,
        "accounts": ACCOUNTS,
        "sent": len(load.sent),
        "acknowledged": len(acknowledged),
        "503": sum(1 for s in load.sent if s.status == 503),
        "other_status": sorted({s.status for s in load.sent} - {0, 200, 503}),
        "no_answer": sum(1 for s in load.sent if s.status == 0),
        "lost": len(lost),
        "changed": len(changed),
        "p99_ms_all": p99(all_ok),
        "baseline_before_kills": baseline,
        "p99_ms_after_kill_worst": max((f["p99_ms"] or 0 for f in kills), default=None),
        "first_200_after_kill_s_worst": max((f["first_200_after_s"] or 0 for f in kills), default=None),
        # None when some kill's window never got back under the target.
        "p99_under_50ms_from_s_worst": None
        if any(f["p99_under_target_from_s"] is None for f in kills)
        else max((f["p99_under_target_from_s"] for f in kills), default=None),
        "per_kill": kills,
    }
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(report, indent=2) + "\n")
    print("\nbroker kills: " + json.dumps({k: v for k, v in report.items() if k != "per_kill"}))
    assert len(kills) == KILLS
    assert acknowledged, "no start was acknowledged"
    assert lost == [], f"{len(lost)} acknowledged starts are gone: {lost[:20]}"
    assert changed == [], f"{len(changed)} starts read back with another answer: {changed[:10]}"
