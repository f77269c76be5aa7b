"""Append calls straight to the events topic, exactly as the edge would have written them.

Each body goes through the edge's own validation (`domain.validation.parse_event`) and gets the
same stamp (`id`, `account_id`, `plan`, `received_at`, `trusted`) and key (`account:call_id`) the
edge gives it; only the HTTP hop and the reply are skipped. This builds a backlog the worker folds
as fast as it can (its fold rate) and that the bare consumer reads (its floor), and it drives many
calls across many protected numbers within the time budget for the memory measurement.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from typing import Any

import msgspec

from bench.service import backlog
from bench.traffic import BenchAccount, call_ended, call_started, caller_number, pick
from domain import keys
from domain.events import AnyEvent
from domain.rules import LimitRules
from domain.validation import Stamp, TimeBounds, parse_event
from infra.clock import now_ms
from infra.kafka import make_consumer, make_producer
from infra.settings import Settings

IN_FLIGHT = 2000


def records_for(account: BenchAccount, number: str, call_id: str, at: int, rng: random.Random) -> list[AnyEvent]:
    out = []
    for body in (call_started(call_id, number, caller_number(rng), at), call_ended(call_id, at + 30_000)):
        stamp = Stamp(uuid.uuid4().hex, account.account_id, "guard", now_ms())
        out.append(parse_event(body, stamp, TimeBounds.of(LimitRules())))
    return out


async def prefill(
    settings: Settings, accounts: list[BenchAccount], calls: int, offset: int = 0, seed: int = 7
) -> dict[str, float]:
    """`calls` calls (start and end) spread round-robin over every account's every number."""
    # Each round its own callers: state kept per caller grows as it would with real traffic.
    rng = random.Random(seed * 1_000_003 + offset)
    topic = settings.topic("events")
    producer = make_producer(settings)
    await producer.start()
    started = time.perf_counter()
    base = now_ms() - 120_000
    pending: list[asyncio.Future[Any]] = []
    records = 0
    try:
        for i in range(calls):
            account, number = pick(accounts, offset + i)
            call_id = f"pre-{offset + i}"
            for record in records_for(account, number, call_id, base + i, rng):
                key = keys.call(account.account_id, call_id).encode()
                pending.append(await producer.send(topic, msgspec.json.encode(record), key=key))
                records += 1
            if len(pending) >= IN_FLIGHT:
                await asyncio.gather(*pending)
                pending = []
        await asyncio.gather(*pending)
    finally:
        await producer.stop()
    seconds = time.perf_counter() - started
    return {
        "calls": calls,
        "records": records,
        "seconds": round(seconds, 2),
        "per_s": round(records / seconds, 1),
    }


async def copy_records(settings: Settings, topic: str, start: dict[int, int], to_topic: str) -> int:
    """Append the records of `topic` from `start` (offset by partition) up to its end now to the same
    partitions of `to_topic`, keys and values unchanged; returns how many."""
    consumer = make_consumer(settings)
    producer = make_producer(settings)
    await consumer.start()
    await producer.start()
    try:
        copied = 0
        async for batch in backlog(consumer, topic, start):
            pending = [
                await producer.send(to_topic, record.value, key=record.key, partition=tp.partition)
                for tp, records in batch.items()
                for record in records
            ]
            await asyncio.gather(*pending)
            copied += len(pending)
        return copied
    finally:
        await consumer.stop()
        await producer.stop()
