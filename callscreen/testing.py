"""Callscreen's folds in memory, for tests and benchmarks: the service without Kafka, Faust or RocksDB.

`Harness` takes request bodies as the edge does (validation, stamps) and folds each event through the
in-memory driver of the folds (`domain.replay.Replay`, which the shadow role drives too): its call, the
feature view and the detectors in the order the workers apply them, the listings and the horizon.
`MemoryLog` puts it behind the edge in place of the broker and the workers, for tests of the edge alone:
what it validates, authenticates, limits and answers. The pipeline tests run the same folds through the
real broker and workers, and must give the same answers (tests/test_scenarios_pipeline.py).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass
from typing import Any

import msgspec

from domain import queries
from domain.events import AnyEvent, decode_event
from domain.outbound import Outbound
from domain.policy import Policy
from domain.replay import Replay, scan_of
from domain.rules import Rules
from domain.validation import InputError, Stamp, TimeBounds, parse_event, parse_label
from infra.kafka import partition_for
from infra.settings import Settings
from ingest.log import Fold, LogUnavailable


@dataclass(frozen=True)
class Account:
    id: str
    plan: str = "guard"
    trusted: frozenset[str] = frozenset()
    # What its posts come with: an API key (`key`), or a path token (`ingest`, `gate`).
    credential: str = "key"
    policy: Policy | None = None
    outbound: Outbound | None = None


def as_sent(value: Any) -> Any:
    """`value` as JSON carries it to the edge and the alert topic: a struct's tuples are arrays there."""
    return msgspec.json.decode(msgspec.json.encode(value))


class Harness(Replay):
    def __init__(self, rules: Rules | None = None, partitions: int = 4) -> None:
        super().__init__(rules or Rules(), lambda key: partition_for(key, partitions))
        self.partitions = partitions
        self._ids = itertools.count()

    def post(self, account: Account, body: dict[str, Any], received_at: int) -> tuple[int, Any]:
        """What the edge answers a POST of `body` (as the worker's fold would answer it)."""
        stamp = Stamp(
            f"{next(self._ids):032x}",
            account.id,
            account.plan,
            received_at,
            account.trusted,
            account.credential,
            account.policy,
            account.outbound,
        )
        try:
            event = parse_event(body, stamp, TimeBounds.of(self.rules.limits))
        except InputError as refused:
            return refused.status, {"error": refused.code, **refused.context}
        return self.fold(event)

    def label(self, account: Account, call_id: str, body: dict[str, Any], received_at: int) -> tuple[int, Any]:
        """What the edge answers `POST /v1/calls/<call_id>/label` with `body`."""
        stamp = Stamp(f"{next(self._ids):032x}", account.id, account.plan, received_at, account.trusted)
        try:
            event = parse_label(body, stamp, call_id)
        except InputError as refused:
            return refused.status, {"error": refused.code, **refused.context}
        return self.fold(event)

    def fold(self, event: AnyEvent) -> tuple[int, Any]:
        """What the worker answers `event`, as JSON carries it."""
        outcome = self.fold_event(event)
        return outcome.status, as_sent(outcome.body)

    def reads(self, scan_max_rows: int | None = None) -> queries.Reads:
        """What a worker's read agent reads, here, at most `scan_max_rows` index rows a listing."""
        scan = scan_of(self.tables)
        return queries.Reads(self.view, self.calls.get, scan, self.tables.get, scan, scan_max_rows)


class MemoryLog:
    edge_id = "memory-edge"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.harness = Harness(settings.rules, settings.partitions)
        self.records: list[tuple[str, str, Any]] = []
        self.on_account: Fold = lambda record: None
        self.on_status: Fold = lambda record: None
        self.on_shadow: Fold = lambda record: None
        self.refusing = False
        self.silent_worker = False
        self.follower_dead = False
        self._beat: asyncio.Task[None] | None = None

    async def start(self, on_account: Fold, on_status: Fold, on_shadow: Fold) -> None:
        self.on_account, self.on_status, self.on_shadow = on_account, on_status, on_shadow
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
        elif topic == self.settings.topic("shadow"):
            self.on_shadow(record)

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
            reads = self.harness.reads(self.settings.query_scan_max_rows)
            status, body = queries.answer(question, partition or 0, reads, self.settings.rules)
        answer.set_result({"status": status, "body": msgspec.to_builtins(body)})
        return answer

    def following(self) -> bool:
        return not self.follower_dead

    def forget(self, answer: asyncio.Future[dict[str, Any]]) -> None:
        answer.cancel()
