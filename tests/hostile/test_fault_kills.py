"""Kills at every step of a fold while events stream in: every acknowledged event's effect exactly once in
every consumer (the call and account views, the decisions, alerts and deliveries topics, the alert store,
the webhook receiver) and a rebuild with the same answers.

Two workers of one consumer group share the partitions; each SIGKILLs itself (processors/faults.py) after
a table write, after an append, before an ack and before a commit, in turn: CALLSCREEN_TEST_FAULT_KILLS
kills (default 4, one per step); `make faults` runs 50. A kill moves the dead worker's partitions to the
other until it is back, so each worker's view is read while the other refolds.
CALLSCREEN_TEST_FAULT_WORKERS=1 runs one worker. Failed payments on the billing topic are folded by the
same workers and must raise their alert once. On the old code the refold after a kill found its own writes
and appended nothing: the detector's alerts were lost.

Faults it found are fixed:
- partitions never folded again after the last kill (Faust dropped a fetched batch; processors/folds/commits.py,
  `_refetch_lost_tails`);
- a call readable by id but missing from the listing until a rebuild (its start refolded on a row the kill
  kept, while the index came back older; `domain.calls.listing_entry`, `domain.index.additions`);
- with two workers, a turn answered 404 `unknown_call`: the worker the partition moved to began after
  records Faust had dropped, with no earlier position to show the gap (`Commits._assignment_start`);
- with two workers, acknowledged effects missing once a partition moved: the refold after a kill found the
  rows the killed run had written locally but never sent to the changelog, wrote nothing, and the next
  owner recovered the partition without them (now RocksDB takes a row only once its changelog holds it,
  processors/state/write_behind.py).

The detectors' alerts are checked against `detect_in_order` over the decisions topic, not against the
posting order: a number's facts come from calls on different event partitions, and after a kill the worker
folds those partitions again in its own interleaving (once a spend alert fell on the other of two calls).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import orjson
import pytest
import trustme

from callscreen.admin import Admin
from callscreen.testing import Account, Harness
from domain.alerts import Alert
from domain.facts import CallDecided, Fact, decode_fact
from domain.replay import detect_in_order
from domain.rules import Rules
from infra.clock import now_ms
from processors.faults import LOG_NAME, POINTS
from tests.receiver import Receiver, receiver_env
from tests.service import create_account, settled, start_service, wait_for_status
from tests.topics import read_topic
from tests.traffic import NO_SWEEP, assert_same_answers, on_usage_day, past_every_window, script, snapshot

pytestmark = pytest.mark.slow

KILLS = int(os.environ.get("CALLSCREEN_TEST_FAULT_KILLS", "4"))
WORKERS = int(os.environ.get("CALLSCREEN_TEST_FAULT_WORKERS", "2"))
# A failed payment on the billing topic every this many events: the first raises the alert, the rest fall
# inside its cooldown.
PAYMENT_EVERY = 150
# Passes of the armed step before the kill: a few folds' work between kills.
EVERY = 15
# Calls posted before the traffic may stop, however soon the kills are in: the script's detectors first
# raise at its 11th call, and by its 40th five alerts of four kinds (checked against the harness). Four
# kills can be in within ten calls, and once a clean-clone run stopped there and saw no detector alert.
LEAST_CALLS = 40
CALLS = LEAST_CALLS + 60 * KILLS


def kills_logged(data_dir: Path) -> list[str]:
    log = data_dir / LOG_NAME
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.faults
@pytest.mark.timeout(180 + 12 * KILLS)  # a hang guard: each kill costs a worker restart
async def test_kills_at_every_step_lose_nothing_and_count_nothing_twice(
    kafka: str, tmp_path: Path, http: aiohttp.ClientSession, receiver: Receiver, webhook_ca: tuple[trustme.CA, Path]
) -> None:
    hook, ca_file = receiver, webhook_ca[1]
    data_dir = tmp_path / "data"
    env = {
        "CALLSCREEN_WORKERS": str(WORKERS),
        "CALLSCREEN_FAULTS": f"every={EVERY},limit={KILLS}",
        "CALLSCREEN_EVENTS_PER_MINUTE": "100000",
        # Every call is read back by id: 50 kills leave some 3,000 calls, past the default 600 reads a minute
        # for the key and 1,200 for the account.
        "CALLSCREEN_READS_PER_MINUTE": "100000",
        "CALLSCREEN_ACCOUNT_READS_PER_MINUTE": "100000",
        **receiver_env(ca_file),
        # No sweep: after a restart its wall-clock ticks can reach an open call before the backlog's end
        # does, which the plain-data pipeline cannot foresee.
        **NO_SWEEP,
    }
    service = start_service(data_dir, kafka, env=env)
    try:
        base_url, settings = service.base_url, service.settings
        account = await create_account(settings, http, base_url)
        hook_url = {"alert_webhook_url": f"{hook.url}/ok/{account.account_id}"}
        async with http.patch(f"{base_url}/v1/account", json=hook_url, headers=account.headers) as r:
            assert r.status == 200
        appended: list[dict[str, Any]] = []
        payments = 0
        start_times: list[tuple[int, int]] = []
        ended = 0
        received_at = now_ms()
        async with Admin(settings) as admin:
            # More calls than the kills need: the loop stops once every kill is in, however long restarts take.
            for n, body in enumerate(script(41, past_every_window(CALLS), CALLS)):
                if n % PAYMENT_EVERY == 0:
                    payments += 1
                    await admin.payment_failed(account.account_id, 4900, payments)
                sent = now_ms()
                async with http.post(f"{base_url}/v1/events", json=body, headers=account.headers) as r:
                    # 503 comes only after the append: the event is in the log all the same.
                    assert r.status in (200, 503), (r.status, await r.text())
                appended.append(body)
                if body["type"] == "call.started":
                    start_times.append((sent, now_ms()))
                # Stop between calls once every kill is in: an open call would be ticked by the wall clock.
                ended += body["type"] == "call.ended"
                if body["type"] == "call.ended" and ended >= LEAST_CALLS and len(kills_logged(data_dir)) == KILLS:
                    break
        deadline = time.monotonic() + 60
        while len(kills_logged(data_dir)) < KILLS:
            assert time.monotonic() < deadline, kills_logged(data_dir)
            await asyncio.sleep(0.2)
        killed = kills_logged(data_dir)
        assert Counter(killed) == Counter(POINTS[i % len(POINTS)] for i in range(KILLS))
        await wait_for_status(http, "GET", f"{base_url}/healthz", 200, timeout_s=60)
        await settled(settings, timeout_s=90)

        # The call and account views: each call as its events make it, the allowance counted once per start.
        starts = [b for b in appended if b["type"] == "call.started"]
        for start in starts:
            async with http.get(f"{base_url}/v1/calls/{start['call_id']}", headers=account.headers) as r:
                assert r.status == 200, start["call_id"]
                call = await r.json()
            posted = [b for b in appended if b["call_id"] == start["call_id"]]
            assert call["user_turns"] == sum(1 for b in posted if b["type"] == "turn.started" and b["role"] == "user")
            assert call["interruptions"] == sum(1 for b in posted if b["type"] == "interruption")
            assert call["state"] == ("ended" if any(b["type"] == "call.ended" for b in posted) else "open")
        async with http.get(f"{base_url}/v1/account", headers=account.headers) as r:
            usage = await r.json()
        assert usage["scoring"]["used_today"] in on_usage_day(usage, start_times)

        # The decisions topic holds every fact the events make, each under one id however often it was
        # appended, and what the detectors placed; the alerts topic holds the call folds' alerts and what the
        # detectors raise reading that topic in its order (across partitions that order is the workers',
        # which a kill may change: a spend crossing can then fall on another call).
        harness = Harness()
        for body in appended:
            harness.post(Account(account.account_id), body, received_at)
        records = sorted(await read_topic(settings, settings.topic("decisions")), key=lambda r: (r.partition, r.offset))
        facts = [(r.key.decode(), decode_fact(r.value)) for r in records]
        detected = detect_in_order(facts, Rules())
        placed = {f.id for f in detected.facts}
        made = {f.id: f for _, f in facts if f.id not in placed}
        assert Counter(map(shape, made.values())) == Counter(map(shape, harness.folded_facts))
        assert placed <= {f.id for _, f in facts}
        decided = {f.call_id for f in made.values() if isinstance(f, CallDecided)}
        assert sorted(decided) == sorted(s["call_id"] for s in starts)
        logged = [
            msgspec.json.decode(r.value, type=Alert) for r in await read_topic(settings, settings.topic("alerts"))
        ]
        by_id = {a.id: a for a in logged}
        raised = {a.id: a for a in detected.alerts}
        assert raised, "the traffic should raise alerts"
        assert {i: a for i, a in by_id.items() if i in raised} == raised
        billed = [a for a in by_id.values() if a.type == "billing.payment_failed"]
        assert [(a.data, a.id) for a in billed] == [({"amount_cents": 4900, "attempt": 1}, billed[0].id)]
        folded = Counter((a.type, orjson.dumps(a.data).decode()) for a in harness.folded_alerts)
        from_calls = Counter((a.type, orjson.dumps(a.data).decode()) for i, a in by_id.items() if i not in raised)
        assert from_calls - Counter({("billing.payment_failed", orjson.dumps(billed[0].data).decode()): 1}) == folded
        listed = await all_alert_ids(http, base_url, account.headers)
        assert sorted(listed) == sorted(by_id)
        deliveries = Counter(orjson.loads(r.body)["id"] for r in hook.received)
        assert deliveries == Counter(by_id.keys())
        # The alerting role's ledger: one attempt and one outcome per alert, none skipped.
        ledger = Counter(
            (d["alert_id"], d["kind"])
            for d in map(orjson.loads, (r.value for r in await read_topic(settings, settings.topic("deliveries"))))
            if d["kind"].startswith("delivery.")
        )
        assert ledger == Counter({(i, kind): 1 for i in by_id for kind in ("delivery.attempt", "delivery.outcome")})

        # A rebuild folds the same log into the same answers.
        callers = sorted({s["from"] for s in starts})[:10]
        before = [await snapshot(http, base_url, account, callers)]
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "callscreen.cli", "rebuild", "--data-dir", str(data_dir)],
            capture_output=True,
            timeout=240,
            env={**os.environ, **service.env, "CALLSCREEN_FAULTS": ""},
        )
        assert done.returncode == 0, done.stderr.decode()[-2000:]
        await wait_for_status(http, "GET", f"{base_url}/healthz", 200, timeout_s=60)
        await settled(settings, timeout_s=90)
        after = [await snapshot(http, base_url, account, callers)]
        assert_same_answers(after, before)
        assert Counter(orjson.loads(r.body)["id"] for r in hook.received) == deliveries
    finally:
        assert service.stop() == 0


def shape(fact: Fact) -> tuple[str, str | None]:
    """A fact as the plain-data pipeline can foresee it: the edge's event ids are its own."""
    return type(fact).__name__, getattr(fact, "call_id", None)


async def all_alert_ids(http: aiohttp.ClientSession, base_url: str, headers: dict[str, str]) -> list[str]:
    ids: list[str] = []
    url = f"{base_url}/v1/alerts?limit=200"
    while url:
        async with http.get(url, headers=headers) as r:
            page = await r.json()
        ids += [a["id"] for a in page["data"]]
        url = f"{base_url}/v1/alerts?limit=200&cursor={page['next_cursor']}" if page["next_cursor"] else ""
    return ids
