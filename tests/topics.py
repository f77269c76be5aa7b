"""Reading topics back with a plain Kafka client, as an analyst or an auditor would."""

from __future__ import annotations

from infra.kafka import read_all as read_topic

__all__ = ["read_topic"]
