"""A log in memory for the edge's own tests: appends land at once, and the pure folds answer.

It stands in for the broker and the workers in tests of the edge alone (tests/unit/test_edge.py):
what the edge validates, authenticates, limits and answers. The pipeline tests cover the broker.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import msgspec

from domain import queries
from domain.events import decode_event
from infra.settings import Settings
from ingest.log import Fold, LogUnavailable
from tests.harness import Harness


class MemoryLog:
    edge_id = "memory-edge"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.harness = Harness(settings.rules, settings.partitions)
        self.records: list[tuple[str, str, Any]] = []
        self.on_account: Fold = lambda record: None
        self.on_status: Fold = lambda record: None
        self.refusing = False
        self.silent_worker = False
        self.follower_dead = False
        self._beat: asyncio.Task[None] | None = None

    async def start(self, on_account: Fold, on_status: Fold) -> None:
        self.on_account, self.on_status = on_account, on_status
        self._beat = asyncio.create_task(self._beat_as_a_worker())

    async def _beat_as_a_worker(self) -> None:
        """A ready worker holding every partition, as a real one's heartbeats say."""
        while True:
            if not self.silent_worker:
                partitions = list(range(self.settings.partitions))
                beat = {"kind": "worker.heartbeat", "worker": "memory", "partitions": partitions, "ready": True}
                self.on_status({**beat, "sent_at": time.time()})
            await asyncio.sleep(0.5)

    async def stop(self) -> None:
        if self._beat is not None:
            self._beat.cancel()

    async def append(self, topic: str, key: str, value: bytes) -> None:
        if self.refusing:
            raise LogUnavailable("refusing")
        record = msgspec.json.decode(value)
        self.records.append((topic, key, record))
        if topic == self.settings.topic("accounts"):
            self.on_account(record)

    async def ask(self, topic: str, key: str, value: bytes, partition: int | None) -> asyncio.Future[dict[str, Any]]:
        if self.refusing:
            raise LogUnavailable("refusing")
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        if self.silent_worker:
            return answer
        if topic == self.settings.topic("events"):
            status, body = self.harness.fold(decode_event(value))
        else:
            question = queries.decode_question(value)
            status, body = queries.answer(question, partition or 0, self.harness.reads(), self.settings.rules)
        answer.set_result({"status": status, "body": msgspec.to_builtins(body)})
        return answer

    def following(self) -> bool:
        return not self.follower_dead

    def forget(self, answer: asyncio.Future[dict[str, Any]]) -> None:
        answer.cancel()
