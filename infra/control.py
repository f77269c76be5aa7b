"""Generations of derived state: `callscreen rebuild` starts a new one on the control topic.

A generation names the workers' consumer group and Faust changelog topics, so a new generation
folds every source topic from offset 0 into fresh tables. Its record carries the end offsets of
the source topics at the moment of the rebuild: records below them are replays, folded without
side effects (no facts, alerts, replies or ticks are appended again).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson

from infra.kafka import make_consumer, make_producer, partitions, read_all
from infra.settings import Settings

SOURCE_TOPICS = ("events", "decisions", "alerts", "billing", "accounts", "deliveries")


@dataclass(frozen=True)
class Generation:
    number: int = 0
    targets: dict[str, dict[str, int]] = field(default_factory=dict)

    def app_id(self, settings: Settings) -> str:
        return settings.app_id if self.number == 0 else f"{settings.app_id}-g{self.number}"

    def replaying(self, topic: str, partition: int, offset: int) -> bool:
        return offset < self.targets.get(topic, {}).get(str(partition), 0)


def latest(records: list[dict[str, Any]]) -> Generation:
    found = [r for r in records if r.get("kind") == "generation"]
    if not found:
        return Generation()
    last = max(found, key=lambda r: int(r["generation"]))
    return Generation(int(last["generation"]), last["targets"])


async def read_records(settings: Settings, topic: str) -> list[dict[str, Any]]:
    return [orjson.loads(record.value) for record in await read_all(settings, topic)]


async def log_identity(settings: Settings) -> str:
    """The id of the log itself: the first `log.created` record on the control topic, appended if none.

    A broker that restarted empty (the memory-only embedded one) has a new id, so tables folded
    from the old log are known to be stale. Two processes racing here both settle on the first record.
    """
    topic = settings.topic("control")
    found = [r for r in await read_records(settings, topic) if r.get("kind") == "log.created"]
    if not found:
        producer = make_producer(settings)
        await producer.start()
        try:
            record = {"kind": "log.created", "log_id": uuid.uuid4().hex}
            await producer.send_and_wait(topic, orjson.dumps(record), key=b"log")
        finally:
            await producer.stop()
        found = [r for r in await read_records(settings, topic) if r.get("kind") == "log.created"]
    return str(found[0]["log_id"])


async def current_generation(settings: Settings) -> Generation:
    return latest(await read_records(settings, settings.topic("control")))


async def source_ends(settings: Settings) -> dict[str, dict[str, int]]:
    """End offsets of every source topic, by topic short name and partition."""
    consumer = make_consumer(settings)
    await consumer.start()
    try:
        ends: dict[str, dict[str, int]] = {}
        for name in SOURCE_TOPICS:
            topic = settings.topic(name)
            offsets = await consumer.end_offsets(await partitions(consumer, topic))
            ends[name] = {str(tp.partition): offset for tp, offset in offsets.items()}
        return ends
    finally:
        await consumer.stop()
