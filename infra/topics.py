"""The topics the service reads and writes: partition counts, and which ones are the truth.

Source topics are the log every table is folded from (docs/architecture.md): they keep every
record. Working topics (questions, answers, heartbeats) matter only for a moment and expire.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.settings import Settings

WORKING_RETENTION_MS = 3_600_000


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    source: bool = True
    retention_ms: int | None = None


def topic_specs(settings: Settings) -> list[TopicSpec]:
    """Every topic the service needs, created up front so no path depends on auto-creation."""
    p = settings.partitions

    def working(name: str, partitions: int) -> TopicSpec:
        return TopicSpec(settings.topic(name), partitions, source=False, retention_ms=WORKING_RETENTION_MS)

    return [
        TopicSpec(settings.topic("events"), p),
        TopicSpec(settings.topic("accounts"), p),
        TopicSpec(settings.topic("decisions"), p),
        TopicSpec(settings.topic("alerts"), p),
        TopicSpec(settings.topic("deliveries"), p),
        TopicSpec(settings.topic("billing"), p),
        TopicSpec(settings.topic("control"), 1),
        # Where records no fold can handle are named, with the reason (processors/output/dead_letters.py).
        TopicSpec(settings.topic("dead_letters"), 1),
        # Shadow runs: requests, progress and results (shadow/service.py); one partition keeps each run in order.
        TopicSpec(settings.topic("shadow"), 1),
        working("queries", p),
        working("replies", settings.reply_partitions),
        working("status", 1),
    ]
