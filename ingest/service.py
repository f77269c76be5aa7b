"""The edge's connections to the log: producer, accounts view, replies, worker health."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from typing import Any

import orjson
from aiohttp import web
from aiokafka.errors import KafkaError

from callscreen.accounts import AccountsView, apply
from callscreen.follow import TopicFollower
from callscreen.kafka import make_producer, partition_for
from callscreen.settings import Settings
from ingest.errors import ApiError
from ingest.metrics import EdgeMetrics
from ingest.ratelimit import RateLimiter, UsageLedger, retry_after
from ingest.replies import ReplyRouter

log = logging.getLogger(__name__)

HEARTBEAT_STALE_S = 5.0
# How often an edge tells the others what it admitted: at 1,200 events a minute, 0.2 s (plus a follow hop)
# lets an account overshoot by a few events per edge, well inside the 10% decisions.md allows.
USAGE_REPORT_S = 0.2
# Within the last tenth of its limit an account's admissions are reported at once: what another edge
# admits before it hears of them is the overshoot, and a fast burst admits a lot in 0.2 s.
URGENT_BELOW = 0.1


class Edge:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.metrics = EdgeMetrics()
        self.accounts = AccountsView()
        self.producer = make_producer(settings)
        self.accounts_follower = TopicFollower(settings, settings.topic("accounts"), self._fold_account)
        self.status_follower = TopicFollower(settings, settings.topic("status"), self._fold_status)
        self.replies = ReplyRouter(settings, random.randrange(settings.reply_partitions))
        self.read_limiter = RateLimiter(settings.reads_per_minute)
        self.event_limiter = RateLimiter(settings.events_per_minute)
        self.event_usage = UsageLedger()
        self._usage_urgent = asyncio.Event()
        self.workers: dict[str, tuple[float, frozenset[int], bool]] = {}
        self.last_write_ok = 0.0
        self._tasks: list[asyncio.Task[None]] = []

    def _fold_account(self, record: dict[str, Any]) -> None:
        apply(self.accounts, record)
        self.metrics.admin_applied.labels(kind=str(record.get("kind"))).inc()
        self.metrics.accounts.set(len(self.accounts.accounts))

    def _fold_status(self, record: dict[str, Any]) -> None:
        if record.get("kind") == "worker.heartbeat":
            parts = frozenset(int(p) for p in record.get("partitions", []))
            # When it was sent, not when this edge read it: at start-up the follower replays old beats, and
            # a worker that died since must not count as ready.
            age = max(0.0, time.time() - float(record.get("sent_at", 0)))
            self.workers[str(record["worker"])] = (time.monotonic() - age, parts, bool(record.get("ready")))
        elif record.get("kind") == "worker.stopped":
            self.workers.pop(str(record["worker"]), None)
        elif record.get("kind") == "edge.usage" and record.get("edge") != self.replies.edge_id:
            self._debit_usage(record)

    def _debit_usage(self, record: dict[str, Any]) -> None:
        # Replayed history older than a window has refilled already; the rest still counts.
        if time.time() - float(record.get("sent_at", 0)) >= self.event_limiter.window_s:
            return
        now = time.monotonic()
        for account, spent in record.get("events", {}).items():
            self.event_limiter.debit(account, int(spent), now)

    async def start(self) -> None:
        await self.producer.start()
        await self.replies.start()
        await self.accounts_follower.start()
        await self.status_follower.start()
        await self.accounts_follower.caught_up()
        self._tasks = [
            asyncio.create_task(self._probe_writes(), name="write probe"),
            asyncio.create_task(self._share_usage(), name="usage sharing"),
        ]

    async def _probe_writes(self) -> None:
        """Health needs proof that the log takes writes: append a small heartbeat every second."""
        record = orjson.dumps({"kind": "edge.heartbeat", "edge": self.replies.edge_id})
        while True:
            try:
                await self.producer.send_and_wait(
                    self.settings.topic("status"), record, key=self.replies.edge_id.encode()
                )
                self.last_write_ok = time.monotonic()
            except KafkaError as exc:
                log.warning("broker refused a write", extra={"error": type(exc).__name__})
            await asyncio.sleep(1.0)

    async def _share_usage(self) -> None:
        """Every edge debits the others' admissions from its own buckets: one account limit across edges."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._usage_urgent.wait(), USAGE_REPORT_S)
            self._usage_urgent.clear()
            events = self.event_usage.drain()
            if not events:
                continue
            record = {"kind": "edge.usage", "edge": self.replies.edge_id, "sent_at": time.time(), "events": events}
            try:
                await self.producer.send_and_wait(
                    self.settings.topic("status"), orjson.dumps(record), key=self.replies.edge_id.encode()
                )
            except KafkaError as exc:
                log.warning("usage report lost", extra={"error": type(exc).__name__})

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await self.status_follower.stop()
        await self.accounts_follower.stop()
        await self.replies.stop()
        await self.producer.stop()

    def healthy(self) -> bool:
        """True when the broker takes writes and every events partition is held by a ready worker."""
        now = time.monotonic()
        if now - self.last_write_ok > HEARTBEAT_STALE_S:
            return False
        held: set[int] = set()
        for seen, parts, ready in self.workers.values():
            if ready and now - seen < HEARTBEAT_STALE_S:
                held |= parts
        return held >= set(range(self.settings.partitions))

    def limit(self, limiter: RateLimiter, subject: str) -> None:
        wait = limiter.take(subject, time.monotonic())
        if wait > 0:
            raise ApiError(
                429,
                "rate_limited",
                headers={"Retry-After": retry_after(wait)},
                limit=limiter.limit,
                window_s=int(limiter.window_s),
            )

    def limit_events(self, account_id: str) -> None:
        """The account's event limit, shared with the other edges through the status topic."""
        self.limit(self.event_limiter, account_id)
        self.event_usage.add(account_id)
        limiter = self.event_limiter
        if limiter.remaining(account_id, time.monotonic()) < URGENT_BELOW * limiter.limit:
            self._usage_urgent.set()

    async def append(self, topic: str, key: str, record: dict[str, Any]) -> None:
        """Append one record and wait for the broker's ack; 503 when the log cannot take it."""
        try:
            await self.producer.send_and_wait(topic, orjson.dumps(record), key=key.encode())
        except KafkaError as exc:
            log.warning("append failed", extra={"topic": topic, "error": type(exc).__name__})
            raise ApiError(503, "unavailable", headers={"Retry-After": "1"}) from exc

    async def send_request(
        self, topic: str, key: str, record: dict[str, Any], partition: int | None = None
    ) -> tuple[str, asyncio.Future[dict[str, Any]]]:
        """Append a record that expects an answer; returns once the broker acknowledged it."""
        corr, future = self.replies.expect()
        try:
            await self.producer.send_and_wait(
                topic, orjson.dumps(record), key=key.encode(), partition=partition, headers=self.replies.headers(corr)
            )
        except KafkaError as exc:
            self.replies.forget(corr)
            log.warning("append failed", extra={"topic": topic, "error": type(exc).__name__})
            raise ApiError(503, "unavailable", headers={"Retry-After": "1"}) from exc
        return corr, future

    async def answer(self, pending: tuple[str, asyncio.Future[dict[str, Any]]]) -> dict[str, Any]:
        """The worker's answer, or 503 past the answer deadline (the record stays in the log)."""
        corr, future = pending
        try:
            return await asyncio.wait_for(future, self.settings.answer_deadline_s)
        except TimeoutError as exc:
            raise ApiError(503, "unavailable", headers={"Retry-After": "1"}) from exc
        finally:
            self.replies.forget(corr)

    async def ask(self, topic: str, key: str, record: dict[str, Any], partition: int | None = None) -> dict[str, Any]:
        return await self.answer(await self.send_request(topic, key, record, partition))

    async def query(self, record: dict[str, Any], key: str) -> dict[str, Any]:
        """Ask the worker that owns `key`'s partition a read-only question."""
        return await self.ask(self.settings.topic("queries"), key, record, partition=self.partition_for(key))

    async def query_all(self, record: dict[str, Any]) -> list[dict[str, Any]]:
        """Ask every partition's owner and gather their answers (scatter/gather for listings)."""
        topic = self.settings.topic("queries")
        return list(
            await asyncio.gather(
                *(self.ask(topic, str(p), record, partition=p) for p in range(self.settings.partitions))
            )
        )

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.settings.partitions)


EDGE: web.AppKey[Edge] = web.AppKey("edge", Edge)


def edge_of(request: web.Request) -> Edge:
    return request.app[EDGE]
