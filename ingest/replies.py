"""Request/reply over Kafka: the edge's own correlation ids on a pre-created replies topic.

Each edge reads one replies partition with a group-less consumer (no slow group join) and keeps
only the replies addressed to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import Any

import orjson
from aiokafka import TopicPartition

from callscreen.kafka import make_consumer
from callscreen.settings import Settings

log = logging.getLogger(__name__)


class ReplyRouter:
    def __init__(self, settings: Settings, partition: int) -> None:
        self.topic = settings.topic("replies")
        self.partition = partition
        self.edge_id = uuid.uuid4().hex[:12]
        self.consumer = make_consumer(settings)
        self.pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.consumer.start()
        tp = TopicPartition(self.topic, self.partition)
        self.consumer.assign([tp])
        await self.consumer.seek_to_end(tp)
        await self.consumer.position(tp)
        self._task = asyncio.create_task(self._run(), name="replies")

    def expect(self) -> tuple[str, asyncio.Future[dict[str, Any]]]:
        """A new correlation id and the future its reply will resolve."""
        corr = f"{self.edge_id}.{uuid.uuid4().hex}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[corr] = future
        return corr, future

    def forget(self, corr: str) -> None:
        self.pending.pop(corr, None)

    def headers(self, corr: str) -> list[tuple[str, bytes]]:
        return [("reply-partition", str(self.partition).encode()), ("corr", corr.encode())]

    async def _run(self) -> None:
        while True:
            batches = await self.consumer.getmany(timeout_ms=1000)
            for messages in batches.values():
                for message in messages:
                    corr = message.key.decode() if message.key else ""
                    future = self.pending.pop(corr, None)
                    if future is not None and not future.done():
                        future.set_result(orjson.loads(message.value))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.consumer.stop()
