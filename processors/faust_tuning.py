"""Two waits inside Faust's aiokafka consumer: how long an empty fetch is held, and the prefetch backoff.

Faust hard-codes `fetch_max_wait_ms=1500`; the worker uses the service's setting instead. On the
in-memory development broker aiokafka's 100 ms prefetch backoff also put ~100 ms stalls into about
3% of answers (300 sequential starts: p99 105 ms before, 18 ms after a 5 ms backoff). On Kafka the
short backoff is harmful: the fetcher then sends a long poll that leaves out the partition still
being consumed, and that partition's next record waits for the poll to end (50 concurrent starts
missed the 2 s answer deadline with it). Applied once, before the app starts.
"""

from __future__ import annotations

from typing import Any

from faust.transport.drivers import aiokafka as driver

_original = driver.AIOKafkaConsumerThread._create_worker_consumer
MEMORY_PREFETCH_BACKOFF_S = 0.005


def tune_consumer(fetch_max_wait_ms: int, memory_broker: bool) -> None:
    def create_worker_consumer(self: Any, transport: Any) -> Any:
        consumer = _original(self, transport)
        consumer._fetch_max_wait_ms = fetch_max_wait_ms
        if not memory_broker:
            return consumer
        start = consumer.start

        async def start_then_tune() -> None:
            await start()
            consumer._fetcher._prefetch_backoff = MEMORY_PREFETCH_BACKOFF_S

        consumer.start = start_then_tune
        return consumer

    driver.AIOKafkaConsumerThread._create_worker_consumer = create_worker_consumer  # type: ignore[method-assign]
