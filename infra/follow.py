"""Follow a topic from its start with a group-less consumer and hand each record to a fold."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from infra.kafka import make_consumer, partitions
from infra.settings import Settings

log = logging.getLogger(__name__)


class TopicFollower:
    """Reads every partition of one topic from offset 0 and applies each JSON record in order."""

    def __init__(self, settings: Settings, topic: str, fold: Callable[[dict[str, Any]], None]) -> None:
        self.settings = settings
        self.topic = topic
        self.fold = fold
        self.consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None
        self._targets: dict[TopicPartition, int] = {}
        # The offset after the last record applied, per partition.
        self.applied: dict[TopicPartition, int] = {}
        self._caught_up = asyncio.Event()

    async def start(self) -> None:
        # Followers are off the answer path: a longer broker wait keeps an idle service quiet.
        consumer = self.consumer = make_consumer(self.settings, follower=True)
        await consumer.start()
        assigned = await partitions(consumer, self.topic)
        consumer.assign(assigned)
        await consumer.seek_to_beginning(*assigned)
        self._targets = {tp: off for tp, off in (await consumer.end_offsets(assigned)).items() if off > 0}
        if not self._targets:
            self._caught_up.set()
        self._task = asyncio.create_task(self._run(consumer), name=f"follow {self.topic}")

    def alive(self) -> bool:
        """False once the follower's task has ended (a fatal consumer error): its view is frozen."""
        return self._task is not None and not self._task.done()

    async def caught_up(self) -> None:
        """Returns once every record that existed when the follower started has been applied."""
        await self._caught_up.wait()

    async def reached(self, ends: dict[TopicPartition, int], poll_s: float = 0.01) -> None:
        """Returns once every record below `ends` (offsets read elsewhere, e.g. on a consumer that never
        fetches) has been applied."""
        while any(self.applied.get(tp, 0) < end for tp, end in ends.items() if end > 0):
            await asyncio.sleep(poll_s)

    async def _run(self, consumer: AIOKafkaConsumer) -> None:
        while True:
            batches = await consumer.getmany(timeout_ms=500)
            for tp, messages in batches.items():
                for message in messages:
                    try:
                        self.fold(orjson.loads(message.value))
                    except Exception:
                        log.exception("skipped a record that does not fold", extra={"topic": self.topic})
                if messages:
                    self.applied[tp] = messages[-1].offset + 1
                target = self._targets.get(tp)
                if target is not None and messages and messages[-1].offset + 1 >= target:
                    del self._targets[tp]
            if not self._targets:
                self._caught_up.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.consumer is not None:
            await self.consumer.stop()
