"""The topics the service reads and writes, with their partition counts and cleanup policies."""

from __future__ import annotations

from dataclasses import dataclass

from callscreen.settings import Settings


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    compacted: bool = False


def topic_specs(settings: Settings) -> list[TopicSpec]:
    """Every topic the service needs, created up front so no path depends on auto-creation."""
    p = settings.partitions
    return [
        TopicSpec(settings.topic("events"), p),
        TopicSpec(settings.topic("accounts"), p),
        TopicSpec(settings.topic("decisions"), p),
        TopicSpec(settings.topic("alerts"), p),
        TopicSpec(settings.topic("deliveries"), p),
        TopicSpec(settings.topic("billing"), p),
        TopicSpec(settings.topic("queries"), p),
        TopicSpec(settings.topic("replies"), settings.reply_partitions),
        TopicSpec(settings.topic("status"), 1),
        TopicSpec(settings.topic("control"), 1),
    ]
