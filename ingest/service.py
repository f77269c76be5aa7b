"""The edge's state and its conversation with the log: accounts, rate limits, workers' health, answers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any, NoReturn

import msgspec
from aiohttp import web

from domain import keys
from domain.accounts import AccountsView, apply, stamp
from domain.alerts import SCREENING_LOST
from domain.events import AnyEvent, event_type
from domain.queries import Question
from domain.shadow import ShadowView
from domain.times import format_ms
from infra.clock import now_ms
from infra.kafka import partition_for
from infra.settings import Settings
from ingest.errors import ApiError, unavailable
from ingest.event_turns import EventTurns, TurnRefused
from ingest.log import Log, LogUnavailable
from ingest.metrics import EdgeMetrics
from ingest.ratelimit import DailyQuota, RateLimiter, UsageLedger, retry_after

logger = logging.getLogger(__name__)

HEARTBEAT_STALE_S = 5.0
DAY_S = 86_400
# How often an edge tells the others what it admitted: at 1,200 events a minute, 0.2 s (plus a follow hop)
# lets an account overshoot by a few events per edge, well inside the 10% docs/api.md allows.
USAGE_REPORT_S = 0.2
# Within the last half of its limit an account's admissions are reported at once: what another edge
# admits before it hears of them is the overshoot, and a fast burst admits a lot in 0.2 s.
URGENT_BELOW = 0.5
# There, with other edges alive, an edge admits at most its share of what remains until it reads its own
# report back from the status topic (one partition: by then it has read every report appended before
# it), so a slow hop slows the burst instead of letting it through. Past this wait it admits as before.
CONFIRM_WAIT_S = 1.0


class Edge:
    """The edge's state (accounts, limits, the workers' health) and its conversation with the log."""

    def __init__(self, settings: Settings, log: Log) -> None:
        self.settings = settings
        self.log = log
        self.metrics = EdgeMetrics()
        self.accounts = AccountsView()
        self.read_limiter = RateLimiter(settings.rules.limits.reads_per_minute)
        self.account_read_limiter = RateLimiter(settings.rules.limits.account_reads_per_minute)
        self.event_limiter = RateLimiter(settings.rules.limits.events_per_minute)
        self.event_usage = UsageLedger()
        self.byte_quota = DailyQuota(settings.rules.limits.event_bytes_per_day)
        self.event_turns = EventTurns(settings.events_in_flight_per_account, settings.events_waiting_per_account)
        self.byte_usage = UsageLedger()
        self._usage_urgent = asyncio.Event()
        # Events this edge admitted per account that it has not yet read back in its own usage reports.
        self._unconfirmed: dict[str, int] = {}
        self._read_back = asyncio.Event()
        self.other_edges: dict[str, float] = {}
        self.workers: dict[str, tuple[float, frozenset[int], bool]] = {}
        self.last_write_ok = 0.0
        # Since when gated calls have been answered with no score, and how many (`screening_lost`).
        self.unscored_since: float | None = None
        self.unscored_calls = 0
        self.unscored_accounts: set[str] = set()
        self._tasks: list[asyncio.Task[None]] = []
        # Every shadow run's latest state, as the shadow topic tells it (`ingest/routes_shadow.py`).
        self.shadows = ShadowView()

    def fold_account(self, record: dict[str, Any]) -> None:
        apply(self.accounts, record)
        self.metrics.admin_applied.labels(kind=str(record.get("kind"))).inc()
        self.metrics.accounts.set(len(self.accounts.accounts))

    def fold_shadow(self, record: dict[str, Any]) -> None:
        self.shadows.apply(record)

    def fold_status(self, record: dict[str, Any]) -> None:
        if record.get("kind") == "worker.heartbeat":
            parts = frozenset(int(p) for p in record.get("partitions", []))
            # When it was sent, not when this edge read it: at start-up the follower replays old beats, and
            # a worker that died since must not count as ready.
            age = max(0.0, time.time() - float(record.get("sent_at", 0)))
            self.workers[str(record["worker"])] = (time.monotonic() - age, parts, bool(record.get("ready")))
        elif record.get("kind") == "worker.stopped":
            self.workers.pop(str(record["worker"]), None)
        elif record.get("kind") == "edge.heartbeat" and record.get("edge") != self.log.edge_id:
            now = time.monotonic()
            self.other_edges = {e: seen for e, seen in self.other_edges.items() if now - seen < HEARTBEAT_STALE_S}
            self.other_edges[str(record["edge"])] = now
        elif record.get("kind") == "edge.usage" and record.get("edge") != self.log.edge_id:
            self._debit_usage(record)
        elif record.get("kind") == "edge.usage":
            self._confirm(record.get("events", {}))

    def _confirm(self, events: dict[str, int]) -> None:
        for account, spent in events.items():
            left = self._unconfirmed.get(account, 0) - int(spent)
            if left > 0:
                self._unconfirmed[account] = left
            else:
                self._unconfirmed.pop(account, None)
        self._read_back.set()
        self._read_back = asyncio.Event()

    def _debit_usage(self, record: dict[str, Any]) -> None:
        # Replayed history older than a window has refilled already; the rest still counts.
        if time.time() - float(record.get("sent_at", 0)) >= self.event_limiter.window_s:
            return
        now = time.monotonic()
        for account, spent in record.get("events", {}).items():
            self.event_limiter.debit(account, int(spent), now)
        day = int(record.get("sent_at", 0)) // DAY_S
        if day == int(time.time()) // DAY_S:
            for account, size in record.get("bytes", {}).items():
                self.byte_quota.debit(account, int(size), day)

    async def start(self) -> None:
        await self.log.start(self.fold_account, self.fold_status, self.fold_shadow)
        self._tasks = [
            asyncio.create_task(self._probe_writes(), name="write probe"),
            asyncio.create_task(self._share_usage(), name="usage sharing"),
        ]

    async def _probe_writes(self) -> None:
        """Health needs proof that the log takes writes: append a small heartbeat every second."""
        record = msgspec.json.encode({"kind": "edge.heartbeat", "edge": self.log.edge_id})
        while True:
            try:
                await self.log.append(self.settings.topic("status"), self.log.edge_id, record)
                self.last_write_ok = time.monotonic()
            except LogUnavailable as exc:
                logger.warning("broker refused a write", extra={"error": str(exc)})
            await asyncio.sleep(1.0)

    async def _share_usage(self) -> None:
        """Every edge debits the others' admissions from its own buckets: one account limit across edges."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._usage_urgent.wait(), USAGE_REPORT_S)
            self._usage_urgent.clear()
            events, sizes = self.event_usage.drain(), self.byte_usage.drain()
            if not events:
                continue
            record = {
                "kind": "edge.usage",
                "edge": self.log.edge_id,
                "sent_at": time.time(),
                "events": events,
                "bytes": sizes,
            }
            try:
                await self.log.append(self.settings.topic("status"), self.log.edge_id, msgspec.json.encode(record))
            except LogUnavailable as exc:
                logger.warning("usage report lost", extra={"error": str(exc)})
                # It will never be read back: waiting for it would only hold admissions up.
                self._confirm(events)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await self.log.stop()

    def healthy(self) -> bool:
        """True when the broker takes writes, the accounts and status views follow their topics, and every
        events partition is held by a ready worker."""
        return not self.unhealthy()

    def unhealthy(self) -> dict[str, Any]:
        """What keeps the edge from answering: `/healthz`'s detail for an operator; empty when healthy."""
        now = time.monotonic()
        held: set[int] = set()
        for seen, parts, ready in self.workers.values():
            if ready and now - seen < HEARTBEAT_STALE_S:
                held |= parts
        found: dict[str, Any] = {}
        if not self.log.following():
            found["following"] = False
        if now - self.last_write_ok > HEARTBEAT_STALE_S:
            found["broker_writes"] = False
        unheld = sorted(set(range(self.settings.partitions)) - held)
        if unheld:
            # A partition no ready worker holds: calls keyed there cannot be scored.
            found["unscored_partitions"] = unheld
        return found

    async def screening_lost(self, account_id: str, number: str, choice: str) -> None:
        """A gated call answered with no score (its number's `unavailable` choice): counted, the first of
        an outage on this edge is a warning, and the account's first is reported on the accounts topic,
        where a worker raises `platform.screening_unavailable` for its owner. Screening never goes off
        silently."""
        self.metrics.gate_unscored.labels(choice=choice).inc()
        if account_id not in self.unscored_accounts:
            self.unscored_accounts.add(account_id)
            report = stamp(
                {"kind": SCREENING_LOST, "account_id": account_id, "number": number, "choice": choice}, now_ms()
            )
            with contextlib.suppress(ApiError):
                # The log may be what is down: the counter and the warning still say so.
                await self.append(self.settings.topic("accounts"), account_id, report)
        if self.unscored_since is None:
            self.unscored_since, self.unscored_calls = time.monotonic(), 0
            logger.warning(
                "gated calls are taking their numbers' unavailable choice: no score within the deadline",
                extra={"account_id": account_id, "choice": choice, **self.unhealthy()},
            )
        self.unscored_calls += 1

    def screening_back(self) -> None:
        self.unscored_accounts.clear()
        if self.unscored_since is not None:
            logger.warning(
                "gated calls are scored again",
                extra={"unscored": self.unscored_calls, "seconds": round(time.monotonic() - self.unscored_since, 1)},
            )
            self.unscored_since = None

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

    async def limit_events(self, account_id: str) -> None:
        """The account's event limit, shared with the other edges through the status topic."""
        limiter = self.event_limiter
        deadline = time.monotonic() + CONFIRM_WAIT_S
        while (wait := deadline - time.monotonic()) > 0:
            remaining = limiter.remaining(account_id, time.monotonic())
            edges = 1 + sum(1 for seen in self.other_edges.values() if time.monotonic() - seen < HEARTBEAT_STALE_S)
            unconfirmed = self._unconfirmed.get(account_id, 0)
            if edges == 1 or remaining >= URGENT_BELOW * limiter.limit or unconfirmed < max(1.0, remaining / edges):
                break
            self._usage_urgent.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._read_back.wait(), wait)
        self.limit(limiter, account_id)
        self.event_usage.add(account_id)
        self._unconfirmed[account_id] = self._unconfirmed.get(account_id, 0) + 1
        if limiter.remaining(account_id, time.monotonic()) < URGENT_BELOW * limiter.limit:
            self._usage_urgent.set()

    def charge_bytes(self, account_id: str, size: int) -> None:
        """The account's daily storage quota, shared with the other edges like its event limit."""
        now = time.time()
        day = int(now) // DAY_S
        if not self.byte_quota.charge(account_id, size, day):
            resets = (day + 1) * DAY_S
            raise ApiError(
                429,
                "quota_exceeded",
                headers={"Retry-After": retry_after(resets - now)},
                limit=self.byte_quota.limit,
                resets_at=format_ms(resets * 1000),
            )
        self.byte_usage.add(account_id, size)

    async def append(self, topic: str, key: str, record: Any) -> None:
        """Append one record and wait for the broker's ack; 503 when the log cannot take it."""
        try:
            await self.log.append(topic, key, msgspec.json.encode(record))
        except LogUnavailable as exc:
            logger.warning("append failed", extra={"topic": topic, "error": str(exc)})
            raise unavailable() from exc

    async def send_request(
        self, topic: str, key: str, record: Any, partition: int | None = None
    ) -> asyncio.Future[dict[str, Any]]:
        """Append a record that expects an answer; returns once the broker acknowledged it."""
        if partition is None:
            # The partition Kafka's partitioner picks (`infra.kafka.partition_for`).
            partition = self.partition_for(key)
        try:
            return await self.log.ask(topic, key, msgspec.json.encode(record), partition)
        except LogUnavailable as exc:
            logger.warning("append failed", extra={"topic": topic, "error": str(exc)})
            raise unavailable() from exc

    async def answer(self, pending: asyncio.Future[dict[str, Any]]) -> dict[str, Any]:
        """The worker's answer, or 503 past the answer deadline (the record stays in the log)."""
        try:
            return await asyncio.wait_for(asyncio.shield(pending), self.settings.answer_deadline_s)
        except TimeoutError as exc:
            raise unavailable() from exc
        finally:
            self.log.forget(pending)

    async def ask(self, topic: str, key: str, record: Any, partition: int | None = None) -> dict[str, Any]:
        return await self.answer(await self.send_request(topic, key, record, partition))

    async def send_event(self, account_id: str, event: AnyEvent) -> asyncio.Future[dict[str, Any]]:
        """Append an event under its call's key, counted by type; returns once the broker acknowledged it."""
        pending = await self.send_request(self.settings.topic("events"), keys.call(account_id, event.call_id), event)
        self.metrics.child(self.metrics.events, event_type(event)).inc()
        return pending

    @contextlib.asynccontextmanager
    async def event_turn(self, account_id: str) -> AsyncIterator[None]:
        """One of the account's turns at appending answered events (ingest/event_turns.py) for the block;
        503 with nothing appended when none comes within the answer deadline or its queue is full."""
        try:
            await self.event_turns.take(account_id, self.settings.answer_deadline_s)
        except TurnRefused as exc:
            self.metrics.child(self.metrics.event_turns_refused, "waited" if exc.waited else "queue_full").inc()
            if exc.waited:
                raise unavailable() from None
            await self.refuse_account_full()
        try:
            yield
        finally:
            self.event_turns.give_back(account_id)

    async def ask_event(self, account_id: str, event: AnyEvent) -> dict[str, Any]:
        """Append an event in one of its account's turns and wait for the worker's answer, its latency
        (from the append) observed by type."""
        async with self.event_turn(account_id):
            started = time.perf_counter()
            reply = await self.answer(await self.send_event(account_id, event))
        self.metrics.child(self.metrics.answers, event_type(event)).observe(time.perf_counter() - started)
        return reply

    async def question(self, key: str, record: Question, partition: int | None = None) -> dict[str, Any]:
        """The answer of the worker that owns `key`'s partition (or `partition`) to a read-only question;
        503 when the worker refused it because the account's turn at its questions was full."""
        reply = await self.ask(self.settings.topic("queries"), key, record, partition)
        if reply["status"] == 503:
            await self.refuse_account_full()
        return reply

    async def refuse_account_full(self) -> NoReturn:
        """503 for an account whose share (of a worker's questions, of this edge's event turns) is full,
        held as a 429 is (ingest.app.hold): the account is over its share, not the service down."""
        await asyncio.sleep(self.settings.refusal_hold_s)
        raise unavailable()

    async def query(self, record: Question, key: str) -> dict[str, Any]:
        """Ask the worker that owns `key`'s partition a read-only question, within the account's budget."""
        self.limit(self.account_read_limiter, record.account_id)
        return await self.question(key, record)

    async def query_all(self, record: Question) -> list[dict[str, Any]]:
        """Ask every partition's owner and gather their answers (scatter/gather for listings), within the
        account's budget: one question, however many partitions it asks."""
        self.limit(self.account_read_limiter, record.account_id)
        return list(
            await asyncio.gather(*(self.question(str(p), record, partition=p) for p in range(self.settings.partitions)))
        )

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.settings.partitions)


EDGE: web.AppKey[Edge] = web.AppKey("edge", Edge)


def edge_of(request: web.Request) -> Edge:
    return request.app[EDGE]
