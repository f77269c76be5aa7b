"""`callscreen rebuild`: start a new generation and follow the workers while they fold it.

The running service's workers see the new generation on the control topic, restart into fresh
tables (a new consumer group and changelogs) and fold every source topic from offset 0; records
below the targets taken here are replays, folded without appending anything. This command shows
their progress and prints a summary once every partition is past its target.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from typing import Any, TextIO

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from infra.clock import now_ms
from infra.control import SOURCE_TOPICS, current_generation, source_ends
from infra.kafka import make_consumer, make_producer
from infra.settings import Settings

FOLDED_BY_AGENTS = tuple(t for t in SOURCE_TOPICS if t != "deliveries")
# Workers beat every second: this long without one means none is running.
WORKER_WAIT_S = 5.0


def progress_line(done: int, total: int, partitions_done: int, partitions: int, elapsed: float) -> str:
    width = 30
    filled = width if total == 0 else int(width * done / total)
    rate = done / elapsed if elapsed > 0 else 0.0
    left = (total - done) / rate if rate > 0 else 0.0
    bar = "#" * filled + "-" * (width - filled)
    return (
        f"[{bar}] {done:,}/{total:,} records  {partitions_done}/{partitions} partitions  "
        f"{rate:,.0f} rec/s  {left:,.0f}s left"
    )


def tally(
    beats: dict[str, dict[str, Any]], targets: dict[str, dict[str, int]], partitions: int
) -> tuple[int, int, int, bool]:
    """Records and partitions done, across the latest heartbeat of each worker of the new generation."""
    best: dict[tuple[str, str], int] = {}
    for beat in beats.values():
        for topic, parts in beat.get("replay", {}).items():
            for part, (done, _target) in parts.items():
                best[(topic, part)] = max(best.get((topic, part), 0), int(done))
    done = total = finished = 0
    for topic in FOLDED_BY_AGENTS:
        for part in range(partitions):
            target = targets.get(topic, {}).get(str(part), 0)
            reached = min(best.get((topic, str(part)), 0), target)
            total += target
            done += reached
            finished += (topic, str(part)) in best and reached >= target
    all_parts = partitions * len(FOLDED_BY_AGENTS)
    ready = bool(beats) and all(beat.get("ready") for beat in beats.values()) and finished == all_parts
    return done, total, finished, ready


async def wait_for_a_worker(consumer: AIOKafkaConsumer, wait_s: float = WORKER_WAIT_S) -> None:
    """The running workers fold the rebuild; without one it would wait forever, so say so at once."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        for messages in (await consumer.getmany(timeout_ms=250)).values():
            if any(orjson.loads(m.value).get("kind") == "worker.heartbeat" for m in messages):
                return
    raise RuntimeError(
        "no worker is running on this log: the running service's workers do the rebuild; "
        "start `callscreen run` and run `callscreen rebuild` again"
    )


async def rebuild(settings: Settings, out: TextIO = sys.stderr, timeout_s: float = 600.0) -> dict[str, Any]:
    status_topic = settings.topic("status")
    consumer = make_consumer(settings, follower=True)
    producer = make_producer(settings)
    await consumer.start()
    await producer.start()
    try:
        tp = TopicPartition(status_topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_end(tp)
        await wait_for_a_worker(consumer)
        generation = (await current_generation(settings)).number + 1
        targets = await source_ends(settings)
        record = {
            "kind": "generation",
            "id": uuid.uuid4().hex,
            "generation": generation,
            "targets": targets,
            "at": now_ms(),
        }
        await producer.send_and_wait(settings.topic("control"), orjson.dumps(record), key=b"generation")
        started = time.monotonic()
        beats: dict[str, dict[str, Any]] = {}
        partitions = settings.partitions * len(FOLDED_BY_AGENTS)
        while time.monotonic() - started < timeout_s:
            for messages in (await consumer.getmany(timeout_ms=500)).values():
                for message in messages:
                    beat = orjson.loads(message.value)
                    if beat.get("kind") == "worker.heartbeat" and beat.get("generation") == generation:
                        beats[beat["worker"]] = beat
            done, total, finished, ready = tally(beats, targets, settings.partitions)
            elapsed = time.monotonic() - started
            out.write("\r" + progress_line(done, total, finished, partitions, elapsed))
            out.flush()
            if ready:
                out.write("\n")
                return {
                    "generation": generation,
                    "records": total,
                    "partitions": partitions,
                    "workers": len(beats),
                    "seconds": round(elapsed, 2),
                    "rate": round(total / elapsed, 1) if elapsed > 0 else None,
                }
        raise TimeoutError(f"the workers did not finish generation {generation} within {timeout_s}s")
    finally:
        await producer.stop()
        await consumer.stop()


def run_rebuild(settings: Settings) -> dict[str, Any]:
    return asyncio.run(rebuild(settings))
