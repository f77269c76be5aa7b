"""Reading topics back with a plain Kafka client, as an analyst or an auditor would."""

from __future__ import annotations

from infra.kafka import make_admin
from infra.kafka import read_all as read_topic
from infra.settings import Settings

__all__ = ["read_topic", "topic_names"]


async def topic_names(settings: Settings) -> list[str]:
    """Every topic the broker lists now, the other tests' included."""
    admin = make_admin(settings)
    await admin.start()
    try:
        names: list[str] = await admin.list_topics()
        return names
    finally:
        await admin.close()
