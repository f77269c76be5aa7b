"""The alerting role: reads the alerts topic and delivers each alert at most once.

Before a POST it appends a `delivery.attempt` record to the deliveries topic and waits for the
ack; every alert id with any delivery record is never attempted again. A crash between the POST
and its outcome therefore loses the outcome (the alert stays `delivered.webhook: false`) but never
delivers twice, and a replay of the alerts topic delivers nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from typing import Any

import aiohttp
import orjson
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError

from alerting.delivery import Policy, deliver, tls_context
from alerting.metrics import AlertingMetrics, outcome_label
from alerting.resolver import PublicResolver
from domain.accounts import Account, AccountsView, apply
from domain.times import parse_ms
from infra.clock import now_ms
from infra.follow import TopicFollower
from infra.kafka import make_consumer, make_producer, partitions
from infra.metrics import record_lag, serve
from infra.settings import Settings

log = logging.getLogger("callscreen.alerting")

ENVELOPE = ("id", "type", "account_id", "created_at", "data")


def envelope_bytes(alert: dict[str, Any]) -> bytes:
    """The body receivers get: the envelope of docs/api.md, serialised once and signed as is."""
    return orjson.dumps({k: alert[k] for k in ENVELOPE})


def signing_secrets(account: Account, now: int) -> list[str]:
    """The current secret, and the previous one while its 24 h overlap lasts."""
    secrets = [account.signing_secret]
    until = parse_ms(account.previous_secret_until) if account.previous_secret_until else None
    if account.previous_secret and until is not None and now < until:
        secrets.append(account.previous_secret)
    return secrets


class Alerting:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.instance = uuid.uuid4().hex[:12]
        self.accounts = AccountsView()
        self.handled: set[str] = set()
        self.accounts_follower = TopicFollower(settings, settings.topic("accounts"), lambda r: apply(self.accounts, r))
        self.deliveries_follower = TopicFollower(settings, settings.topic("deliveries"), self._fold_delivery)
        self.producer = make_producer(settings)
        self.policy = Policy(settings.webhook_timeout_s, settings.webhook_ports, settings.webhook_allow_private)
        self.slots = asyncio.Semaphore(settings.webhook_concurrency)
        self.tasks: set[asyncio.Task[None]] = set()
        self.consumer: AIOKafkaConsumer | None = None
        # Lag is read on a consumer that never fetches, so it never waits out the follower's long poll.
        self.offsets = make_consumer(settings)
        self.metrics = AlertingMetrics()

    def _fold_delivery(self, record: dict[str, Any]) -> None:
        self.handled.add(str(record.get("alert_id")))

    async def run(self, stop: asyncio.Event) -> None:
        await self.producer.start()
        await self.accounts_follower.start()
        await self.deliveries_follower.start()
        await self.accounts_follower.caught_up()
        await self.deliveries_follower.caught_up()
        resolver = PublicResolver(self.settings.webhook_dns_timeout_s, self.settings.webhook_allow_private)
        connector = aiohttp.TCPConnector(ssl=tls_context(self.settings.webhook_ca_file), limit=0, resolver=resolver)
        consumer = make_consumer(self.settings, follower=True)
        await consumer.start()
        await self.offsets.start()
        topic = self.settings.topic("alerts")
        assigned = await partitions(consumer, topic)
        consumer.assign(assigned)
        await consumer.seek_to_beginning(*assigned)
        self.consumer = consumer
        heartbeat = asyncio.create_task(self._heartbeat(stop))
        try:
            async with aiohttp.ClientSession(connector=connector) as session:
                while not stop.is_set():
                    batches = await consumer.getmany(timeout_ms=200)
                    for messages in batches.values():
                        for message in messages:
                            await self._handle(session, orjson.loads(message.value))
                if self.tasks:
                    await asyncio.wait(self.tasks, timeout=self.settings.webhook_timeout_s)
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
            await consumer.stop()
            await self.offsets.stop()
            await self.deliveries_follower.stop()
            await self.accounts_follower.stop()
            await self.producer.stop()

    async def _record(self, record: dict[str, Any]) -> None:
        stamped = {"at": now_ms(), **record}
        await self.producer.send_and_wait(
            self.settings.topic("deliveries"), orjson.dumps(stamped), key=record["alert_id"].encode()
        )
        self.handled.add(record["alert_id"])

    async def _handle(self, session: aiohttp.ClientSession, alert: dict[str, Any]) -> None:
        alert_id = alert["id"]
        if alert_id in self.handled:
            return
        account = self.accounts.accounts.get(alert["account_id"])
        base = {"alert_id": alert_id, "account_id": alert["account_id"]}
        if account is None or not account.alert_webhook_url:
            await self._record({**base, "kind": "delivery.skipped", "reason": "no_webhook_url"})
            self.metrics.deliveries.labels("skipped").inc()
            return
        await self._record({**base, "kind": "delivery.attempt"})
        await self.slots.acquire()
        task = asyncio.create_task(self._deliver(session, account, alert))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _deliver(self, session: aiohttp.ClientSession, account: Account, alert: dict[str, Any]) -> None:
        try:
            url = account.alert_webhook_url or ""
            outcome = await deliver(
                session, url, envelope_bytes(alert), signing_secrets(account, now_ms()), self.policy
            )
            self.metrics.deliveries.labels(outcome_label(outcome.delivered, outcome.status, outcome.error)).inc()
            self.metrics.delivery_seconds.observe(outcome.duration_ms / 1000)
            log.info(
                "delivery",
                extra={
                    "alert_id": alert["id"],
                    "delivered": outcome.delivered,
                    "status": outcome.status,
                    "error": outcome.error,
                    "ms": outcome.duration_ms,
                },
            )
            await self._record(
                {
                    "alert_id": alert["id"],
                    "account_id": alert["account_id"],
                    "kind": "delivery.outcome",
                    "delivered": outcome.delivered,
                    "status": outcome.status,
                    "error": outcome.error,
                    "duration_ms": outcome.duration_ms,
                }
            )
        finally:
            self.slots.release()

    async def _heartbeat(self, stop: asyncio.Event) -> None:
        """Progress for operators (and tests): how far into each alerts partition this instance has read."""
        while not stop.is_set():
            positions = {}
            if self.consumer is not None:
                positions = {tp: await self.consumer.position(tp) for tp in self.consumer.assignment()}
                await record_lag(self.metrics.lag, "alerting", self.offsets, positions)
            record = {
                "kind": "alerting.heartbeat",
                "instance": self.instance,
                "positions": {str(tp.partition): offset for tp, offset in positions.items()},
                "sent_at": time.time(),
            }
            try:
                await self.producer.send_and_wait(self.settings.topic("status"), orjson.dumps(record), key=b"alerting")
            except KafkaError as exc:
                log.warning("heartbeat not sent", extra={"error": type(exc).__name__})
            await asyncio.sleep(1.0)


async def run_alerting(settings: Settings) -> None:
    import signal

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    alerting = Alerting(settings)
    serve(settings, alerting.metrics.registry)
    await alerting.run(stop)
