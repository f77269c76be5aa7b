"""Faust's aiokafka driver hard-codes `fetch_max_wait_ms=1500` for worker consumers.

On the answer path that wait shows up as tail latency (architecture.md: max 128 ms per hop), so
the worker consumer takes the configured value instead. Applied once, before the app starts.
"""

from __future__ import annotations

from typing import Any

from faust.transport.drivers import aiokafka as driver

_original = driver.AIOKafkaConsumerThread._create_worker_consumer


def set_fetch_max_wait(ms: int) -> None:
    def create_worker_consumer(self: Any, transport: Any) -> Any:
        consumer = _original(self, transport)
        consumer._fetch_max_wait_ms = ms
        return consumer

    driver.AIOKafkaConsumerThread._create_worker_consumer = create_worker_consumer  # type: ignore[method-assign]
