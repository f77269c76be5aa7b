"""Prometheus for the processes behind the edge: their own exporter and the consumer-lag gauge."""

from __future__ import annotations

from collections.abc import Mapping

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from infra.settings import Settings


def serve(settings: Settings, registry: CollectorRegistry) -> None:
    """Expose `registry` on the configured metrics port (a thread of prometheus_client); none when 0."""
    if settings.metrics_port:
        start_http_server(settings.metrics_port, addr=settings.host, registry=registry)


def lag_gauge(registry: CollectorRegistry) -> Gauge:
    return Gauge(
        "callscreen_consumer_lag",
        "Records in the log not yet folded, by consumer, topic and partition.",
        ["consumer", "topic", "partition"],
        registry=registry,
    )


async def record_lag(
    gauge: Gauge, consumer_name: str, ends_from: AIOKafkaConsumer, positions: Mapping[TopicPartition, int]
) -> None:
    """Set the lag of each partition from its end offset (asked of the broker now) and its position."""
    if not positions:
        return
    try:
        ends = await ends_from.end_offsets(list(positions))
    except KafkaError:
        return  # the next heartbeat tries again; a metric never stops the loop that feeds it
    for tp, position in positions.items():
        gauge.labels(consumer_name, tp.topic, str(tp.partition)).set(max(0, ends[tp] - position))
