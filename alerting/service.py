"""The alerting role: reads the alerts topic and delivers each alert at most once.

Before a POST it appends a `delivery.attempt` record to the deliveries topic and waits for the
ack; every alert id with any delivery record is never attempted again. A crash between the POST
and its outcome therefore loses the outcome (the alert stays `delivered.webhook: false`) but never
delivers twice, and a replay of the alerts topic delivers nothing.

A `call.suspicious` alert that names a gated call to end (`hang_up`) is acted on at once, outside the
queues: a `hangup.attempt` record, the carrier's calls API, a `hangup.outcome` record (alerting.carrier).
It too is asked at most once, of the carrier account whose signed form reported the call, with the
number's own carrier auth token (alerting.carrier.hang_up_credentials).

Each alert also fans out to the account's email, text and voice destinations (domain.channels): one
`channel.attempt` record per (alert, channel, destination) before its send (alerting.smtp,
alerting.carrier), or a `channel.skipped` record with the reason (below the floor, past the hourly cap,
the deployment lacks the channel's settings, the queue is full). Each channel has its own fair queues,
so a slow SMTP server or carrier API holds up neither webhooks nor another account's messages.

Instances share the alerts partitions in one consumer group (`<topic_prefix>.alerting`) and start from
its committed offsets, committing only up to the first alert whose first delivery record is not acked
(alerting.offsets). Deliveries wait in per-account queues served round-robin (domain.fairness) under
an alert budget per account (domain.alert_budget), so one account's receiver or flood delays no other.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError

from alerting import messages, smtp
from alerting.carrier import Answered, Credentials, deployment, hang_up, hang_up_credentials, place_call, send_text
from alerting.delivery import Policy, deliver
from alerting.metrics import AlertingMetrics, outcome_label
from alerting.offsets import ReadOffsets
from domain.accounts import Account, AccountsView, apply
from domain.alert_budget import HOUR_MS, AlertBudget
from domain.channels import CHANNELS, Send, fan_out, on_plan
from domain.fairness import FairQueues
from domain.seen import Seen
from domain.times import parse_ms
from infra.clock import now_ms
from infra.follow import TopicFollower
from infra.heap import freeze_startup_objects
from infra.kafka import make_consumer, make_producer, partitions, until_coordinator
from infra.membership import leave_group_on_stop
from infra.metrics import record_lag, serve
from infra.resolver import resolver_for
from infra.sealing import Sealer, SecretKeyProblem, sealer_for
from infra.settings import Settings
from infra.webhook_url import tls_context

log = logging.getLogger("callscreen.alerting")

ENVELOPE = ("id", "type", "account_id", "created_at", "data")


def envelope_bytes(alert: dict[str, Any]) -> bytes:
    """The body receivers get: the envelope of docs/api.md, serialised once and signed as is."""
    return orjson.dumps({k: alert[k] for k in ENVELOPE})


def signing_secrets(account: Account, now: int, sealer: Sealer) -> list[str]:
    """The current secret, and the previous one while its 24 h overlap lasts, opened for signing.

    The account view holds them sealed, as the accounts topic does; they are opened per delivery so
    plaintext lives only as long as one POST.
    """
    secrets = [sealer.open(account.signing_secret)]
    until = parse_ms(account.previous_secret_until) if account.previous_secret_until else None
    if account.previous_secret and until is not None and now < until:
        secrets.append(sealer.open(account.previous_secret))
    return secrets


@dataclass(frozen=True)
class Pending:
    """An alert waiting in its account's queue, and where it was read."""

    partition: TopicPartition
    offset: int
    alert: dict[str, Any]


@dataclass(frozen=True)
class Message:
    """An email, text or voice message waiting in its channel's queue, and where its alert was read."""

    partition: TopicPartition
    offset: int
    alert: dict[str, Any]
    channel: str
    to: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.alert["id"], self.channel, self.to)


def alert_time(alert: dict[str, Any]) -> int:
    """An alert's `created_at` in epoch milliseconds: the event time its delivery records are remembered by."""
    return parse_ms(alert["created_at"]) or 0


def record_time(record: dict[str, Any]) -> int:
    """The event time a delivery record read back is remembered by: its alert's `created_at` when it carries
    it (attempts do), else when it was written (`at`, never before its alert was made: it is kept as long,
    or longer)."""
    created_at = parse_ms(record.get("created_at"))
    if created_at is not None:
        return created_at
    at = record.get("at")
    return at if isinstance(at, int) else 0


def hourly_id(alert_id: str, to: str) -> str:
    """What the hourly caps count: one message of one alert to one destination."""
    return f"{alert_id}|{to}"


class Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    """Hands the consumer group's partition changes to the alerting role."""

    def __init__(self, alerting: Alerting) -> None:
        self.alerting = alerting

    async def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        await self.alerting.release(set(revoked))

    async def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        self.alerting.assigned |= set(assigned)


class Alerting:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.sealer = sealer_for(settings)
        self.instance = uuid.uuid4().hex[:12]
        self.accounts = AccountsView()
        # Alert ids with any `delivery.*` record, and alerts whose gated call the carrier was asked to end (any
        # `hangup.*` record), by their alerts' `created_at`. Bounded (domain.seen): past `alerting_seen_max`
        # the oldest are forgotten and every alert as old counts as handled, so a bound never acts twice.
        self.handled: Seen[str] = Seen(settings.alerting_seen_max)
        self.hung_up: Seen[str] = Seen(settings.alerting_seen_max)
        self.accounts_follower = TopicFollower(settings, settings.topic("accounts"), lambda r: apply(self.accounts, r))
        self.deliveries_follower = TopicFollower(settings, settings.topic("deliveries"), self._fold_delivery)
        self.producer = make_producer(settings)
        self.policy = Policy(settings.webhook_timeout_s, settings.webhook_ports, settings.webhook_allow_private)
        self.queues: FairQueues[Pending] = FairQueues(
            settings.webhook_concurrency, settings.webhook_account_concurrency, settings.webhook_queue_limit
        )
        self.budget = AlertBudget(settings.alerts_per_minute)
        self.available = settings.channels_available
        self.smtp_server = smtp.server_of(settings.smtp_url)
        # The SMTP server's certificate is verified as a webhook receiver's is.
        self.smtp_tls = tls_context(settings.webhook_ca_file)
        self.lanes: dict[str, FairQueues[Message]] = {
            name: FairQueues(
                settings.channel_concurrency, settings.channel_account_concurrency, settings.webhook_queue_limit
            )
            for name in CHANNELS
        }
        # Texts and voice calls per account per hour, one count per (alert, destination).
        self.hourly = {
            "text": AlertBudget(settings.texts_per_hour, HOUR_MS),
            "voice": AlertBudget(settings.voice_calls_per_hour, HOUR_MS),
        }
        # (alert, channel, destination) with any `channel.*` record (bounded as `handled` is), and those queued
        # or being sent here (as many as the lanes hold).
        self.sent: Seen[tuple[str, str, str]] = Seen(settings.alerting_seen_max)
        self.sending: set[tuple[str, str, str]] = set()
        self.reading: ReadOffsets[TopicPartition] = ReadOffsets()
        # Partitions the group gave this instance, and those of them it reads (after levelling, below).
        self.assigned: set[TopicPartition] = set()
        self.owned: set[TopicPartition] = set()
        # Counts revocations: a batch read across one is dropped (its partitions restart at the commit).
        self.generation = 0
        self.committed: dict[TopicPartition, int] = {}
        # Alerts queued or being delivered here: a copy read again meanwhile (a refold appends one) is not queued.
        self.queued: set[str] = set()
        self.wake = asyncio.Event()
        self.tasks: set[asyncio.Task[None]] = set()
        # Delivery records on their way to the broker; a revocation waits for them before it commits.
        self.writes: set[asyncio.Task[None]] = set()
        self.failure: BaseException | None = None
        self.consumer: AIOKafkaConsumer | None = None
        self.carrier: aiohttp.ClientSession | None = None
        # Lag and the deliveries' end offsets are read on a consumer that never fetches, so it never waits
        # out a follower's long poll.
        self.offsets = make_consumer(settings)
        self.metrics = AlertingMetrics()

    def _note(self, record: dict[str, Any], created_at: int | None = None) -> None:
        """A deliveries record seen (read back, or acked): its alert is not acted on again. Remembered by its
        alert's `created_at` (`record_time` when not given)."""
        alert_id = str(record.get("alert_id"))
        kind = str(record.get("kind"))
        at = record_time(record) if created_at is None else created_at
        if kind.startswith("hangup."):
            self.hung_up.add(alert_id, at)
        elif kind.startswith("channel."):
            self.sent.add((alert_id, str(record.get("channel")), str(record.get("to"))), at)
        else:
            self.handled.add(alert_id, at)

    def _fold_delivery(self, record: dict[str, Any]) -> None:
        self._note(record)
        alert_id = str(record.get("alert_id"))
        # Attempts made by any instance, in any run, count against their account's budget.
        created_at = parse_ms(record.get("created_at"))
        if created_at is None:
            return
        if record.get("kind") == "delivery.attempt":
            self.budget.note(str(record.get("account_id")), alert_id, created_at)
        hourly = self.hourly.get(str(record.get("channel")))
        if record.get("kind") == "channel.attempt" and hourly is not None:
            hourly.note(str(record.get("account_id")), hourly_id(alert_id, str(record.get("to"))), created_at)

    async def run(self, stop: asyncio.Event) -> None:
        await self.producer.start()
        await self.accounts_follower.start()
        await self.deliveries_follower.start()
        await self.accounts_follower.caught_up()
        await self.deliveries_follower.caught_up()
        await self.offsets.start()
        connector = aiohttp.TCPConnector(
            ssl=tls_context(self.settings.webhook_ca_file), limit=0, resolver=resolver_for(self.settings)
        )
        group = self.settings.topic("alerting")
        await until_coordinator(self.settings, group)
        leave_group_on_stop()
        consumer = make_consumer(
            self.settings, follower=True, group_id=group, group_instance_id=self.settings.alerting_instance or None
        )
        await consumer.start()
        consumer.subscribe([self.settings.topic("alerts")], listener=Rebalance(self))
        self.consumer = consumer
        heartbeat = asyncio.create_task(self._heartbeat(stop))
        try:
            carrier_connector = aiohttp.TCPConnector(ssl=tls_context(self.settings.webhook_ca_file))
            async with (
                aiohttp.ClientSession(connector=connector) as session,
                aiohttp.ClientSession(connector=carrier_connector) as carrier,
            ):
                self.carrier = carrier
                dispatcher = asyncio.create_task(self._dispatch(session))
                try:
                    while not stop.is_set():
                        batches = await consumer.getmany(timeout_ms=200)
                        generation = self.generation
                        fresh = (set(batches) | self.assigned) - self.owned
                        if fresh:
                            await self._level()
                            if generation != self.generation:
                                continue
                            self.owned |= fresh
                        for partition, messages in batches.items():
                            for message in messages:
                                self._take(partition, message.offset, orjson.loads(message.value))
                        if self.failure is not None:
                            raise self.failure
                        await self._commit(self.owned)
                finally:
                    dispatcher.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await dispatcher
                # What is still queued stays uncommitted: the next owner of its partition delivers it.
                self._drop(lambda _: True)
                if self.tasks:
                    await asyncio.wait(self.tasks, timeout=self.settings.webhook_timeout_s)
                if self.writes:
                    await asyncio.wait(self.writes)
                await self._commit(self.owned)
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
            await consumer.stop()
            await self.offsets.stop()
            await self.deliveries_follower.stop()
            await self.accounts_follower.stop()
            await self.producer.stop()

    def _take(self, partition: TopicPartition, offset: int, alert: dict[str, Any]) -> None:
        """Decide what becomes of one alert read: nothing (already handled), skipped, or queued."""
        if partition not in self.owned:
            return
        self.reading.read(partition, offset)
        alert_id, account_id = alert["id"], alert["account_id"]
        created_at = alert_time(alert)
        if alert.get("hang_up") and not self.hung_up.seen(alert_id, created_at):
            self._start(self._hang_up(alert))
        self._fan_out(partition, offset, alert)
        if self.handled.seen(alert_id, created_at) or alert_id in self.queued:
            if alert_id not in self.handled and alert_id not in self.queued:
                # Older than every alert remembered: maybe handled before it was forgotten, so never sent.
                self.metrics.deliveries.labels("stale").inc()
            self.reading.settle(partition, offset)
            return
        account = self.accounts.accounts.get(account_id)
        if account is None or not account.alert_webhook_url:
            self._skip(partition, offset, alert, "no_webhook_url", "skipped")
        elif not self.queues.room(account_id):
            self._skip(partition, offset, alert, "queue_full", "queue_full")
        elif not self.budget.admit(account_id, alert_id, created_at):
            self._skip(partition, offset, alert, "rate_limited", "rate_limited")
        else:
            self.queues.offer(account_id, Pending(partition, offset, alert))
            self.queued.add(alert_id)
            self.wake.set()

    def _fan_out(self, partition: TopicPartition, offset: int, alert: dict[str, Any]) -> None:
        """Queue or skip the alert's message to each email, text and voice destination not yet handled;
        each holds the alert's offset until its first record is acked."""
        account = self.accounts.accounts.get(alert["account_id"])
        if account is None:
            return
        created_at = alert_time(alert)
        for plan in fan_out(on_plan(account.channels, account.plan), alert["severity"], self.available):
            message = Message(partition, offset, alert, plan.channel, plan.to)
            if self.sent.seen(message.key, created_at) or message.key in self.sending:
                continue
            if not isinstance(plan, Send):
                self._skip_message(message, plan.reason)
                continue
            hourly = self.hourly.get(plan.channel)
            counted = hourly_id(alert["id"], plan.to)
            if hourly is not None and not hourly.admit(alert["account_id"], counted, created_at):
                self._skip_message(message, "rate")
            elif not self.lanes[plan.channel].offer(alert["account_id"], message):
                self._skip_message(message, "queue_full")
            else:
                self.reading.hold(partition, offset)
                self.sending.add(message.key)
                self.wake.set()

    def _skip_message(self, message: Message, reason: str) -> None:
        record = {
            "alert_id": message.alert["id"],
            "account_id": message.alert["account_id"],
            "kind": "channel.skipped",
            "channel": message.channel,
            "to": message.to,
            "reason": reason,
        }
        self.reading.hold(message.partition, message.offset)
        self._write(message.partition, message.offset, record, alert_time(message.alert))
        self.metrics.channel_messages.labels(message.channel, f"skipped_{reason}").inc()

    def _skip(self, partition: TopicPartition, offset: int, alert: dict[str, Any], reason: str, label: str) -> None:
        record = {"alert_id": alert["id"], "account_id": alert["account_id"], "kind": "delivery.skipped"}
        self._write(partition, offset, {**record, "reason": reason}, alert_time(alert))
        self.metrics.deliveries.labels(label).inc()

    def _write(
        self, partition: TopicPartition, offset: int, record: dict[str, Any], created_at: int
    ) -> asyncio.Task[None]:
        """Append an alert's first delivery record (its alert created at `created_at`); its offset is settled
        once the broker acknowledges it."""
        self._note(record, created_at)
        task = asyncio.create_task(self._record(record))
        self.writes.add(task)

        def written(done: asyncio.Task[None]) -> None:
            self.writes.discard(done)
            if done.cancelled():
                return
            if (error := done.exception()) is not None:
                # At most once needs the record before anything else happens to the alert: stop the role.
                self.failure = self.failure or error
                return
            self.reading.settle(partition, offset)

        task.add_done_callback(written)
        return task

    async def _record(self, record: dict[str, Any]) -> None:
        stamped = {"at": now_ms(), **record}
        await self.producer.send_and_wait(
            self.settings.topic("deliveries"), orjson.dumps(stamped), key=record["alert_id"].encode()
        )
        self._note(record)

    async def _dispatch(self, session: aiohttp.ClientSession) -> None:
        """Start deliveries and messages as the fair queues allow, round-robin across accounts; the
        webhook and each channel have their own queues and slots."""
        while True:
            started = False
            if (picked := self.queues.next()) is not None:
                account_id, pending = picked
                self._start(self._deliver(session, account_id, pending))
                started = True
            for lane in self.lanes.values():
                if (message := lane.next()) is not None:
                    self._start(self._send(*message))
                    started = True
            if not started:
                self.wake.clear()
                await self.wake.wait()

    def _start(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _hang_up(self, alert: dict[str, Any]) -> None:
        """End the gated call the alert names: the attempt on record first, so it is never asked twice."""
        self.hung_up.add(alert["id"], alert_time(alert))
        base = {"alert_id": alert["id"], "account_id": alert["account_id"]}
        await self._record({**base, "kind": "hangup.attempt", "call_sid": alert["hang_up"]})
        assert self.carrier is not None, "run() opens it before the first alert is read"
        outcome = await hang_up(self.carrier, self.settings, self._hang_up_credentials(alert), alert["hang_up"])
        label = "ended" if outcome.ok else outcome.error or "failed"
        self.metrics.hang_ups.labels(label).inc()
        log.info("hang-up", extra={"alert_id": alert["id"], "outcome": label, "ms": outcome.duration_ms})
        outcome_record = {
            **base,
            "kind": "hangup.outcome",
            "ended": outcome.ok,
            "status": outcome.status,
            "error": outcome.error,
            "duration_ms": outcome.duration_ms,
        }
        await self._record(outcome_record)

    def _hang_up_credentials(self, alert: dict[str, Any]) -> Credentials | None:
        """The carrier account the alert's signed form named, with its number's auth token opened now (or
        the deployment's for the same account); None makes the attempt `unconfigured`, with no request."""
        account = self.accounts.accounts.get(alert["account_id"])
        gate = account.gates.get(str(alert["data"].get("number", ""))) if account is not None else None
        token = ""
        if gate is not None and gate.carrier_auth_token:
            try:
                token = self.sealer.open(gate.carrier_auth_token)
            except SecretKeyProblem as exc:
                log.warning("cannot open a carrier auth token", extra={"alert_id": alert["id"], "error": str(exc)})
        return hang_up_credentials(str(alert.get("carrier_account_sid") or ""), token, deployment(self.settings))

    async def _send(self, account_id: str, message: Message) -> None:
        """One email, text or voice message: its attempt on record first, then the send, then its outcome."""
        alert = message.alert
        try:
            if message.partition not in self.owned:
                return  # revoked while it waited: the partition's next owner reads it again
            base = {
                "alert_id": alert["id"],
                "account_id": account_id,
                "channel": message.channel,
                "to": message.to,
            }
            attempt = {**base, "kind": "channel.attempt", "created_at": alert["created_at"]}
            await self._write(message.partition, message.offset, attempt, alert_time(alert))
            answered = await self._transmit(message)
            label = "delivered" if answered.ok else answered.error or "failed"
            self.metrics.channel_messages.labels(message.channel, label).inc()
            log.info(
                "message",
                extra={
                    "alert_id": alert["id"],
                    "channel": message.channel,
                    "outcome": label,
                    "ms": answered.duration_ms,
                },
            )
            outcome = {
                **base,
                "kind": "channel.outcome",
                "delivered": answered.ok,
                "status": answered.status,
                "error": answered.error,
                "duration_ms": answered.duration_ms,
            }
            await self._record(outcome)
        finally:
            self.lanes[message.channel].done(account_id)
            self.sending.discard(message.key)
            self.wake.set()

    async def _transmit(self, message: Message) -> Answered:
        about = messages.about(message.alert, self.settings.dashboard_url)
        assert self.carrier is not None, "run() opens it before the first alert is read"
        if message.channel == "email":
            if self.smtp_server is None:
                return Answered(False, None, "unconfigured", 0)  # an SMTP URL that names no host
            mail = messages.email(about, self.settings.email_from, message.to)
            return await smtp.send(self.smtp_server, mail, self.settings.email_timeout_s, self.smtp_tls)
        if message.channel == "text":
            return await send_text(self.carrier, self.settings, message.to, messages.text(about))
        return await place_call(self.carrier, self.settings, message.to, messages.voice_twiml(about))

    async def _deliver(self, session: aiohttp.ClientSession, account_id: str, pending: Pending) -> None:
        alert = pending.alert
        try:
            if pending.partition not in self.owned:
                return  # revoked while it waited: the partition's next owner reads it again
            account = self.accounts.accounts.get(account_id)
            url = account.alert_webhook_url if account is not None else None
            base = {"alert_id": alert["id"], "account_id": account_id}
            if account is None or not url:
                skipped = {**base, "kind": "delivery.skipped", "reason": "no_webhook_url"}
                await self._write(pending.partition, pending.offset, skipped, alert_time(alert))
                self.metrics.deliveries.labels("skipped").inc()
                return
            # The alert's created_at rides on the attempt so every instance's budget can count it.
            attempt = {**base, "kind": "delivery.attempt", "created_at": alert["created_at"]}
            await self._write(pending.partition, pending.offset, attempt, alert_time(alert))
            outcome = await deliver(
                session, url, envelope_bytes(alert), signing_secrets(account, now_ms(), self.sealer), self.policy
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
                    **base,
                    "kind": "delivery.outcome",
                    "delivered": outcome.delivered,
                    "status": outcome.status,
                    "error": outcome.error,
                    "duration_ms": outcome.duration_ms,
                }
            )
        finally:
            self.queues.done(account_id)
            self.queued.discard(alert["id"])
            self.wake.set()

    async def release(self, revoked: set[TopicPartition]) -> None:
        """Partitions taken away: drop their queued alerts, wait for their records' acks, commit, forget."""
        self.generation += 1
        self.assigned -= revoked
        self.owned -= revoked
        self._drop(lambda partition: partition in revoked)
        if self.writes:
            await asyncio.wait(set(self.writes))
        await self._commit(revoked)
        self.reading.forget(revoked)
        for partition in revoked:
            self.committed.pop(partition, None)

    def _drop(self, unwanted: Callable[[TopicPartition], bool]) -> None:
        """Forget the queued deliveries and messages of alerts read from `unwanted` partitions."""
        dropped = self.queues.drop(lambda pending: unwanted(pending.partition))
        self.queued -= {pending.alert["id"] for pending in dropped}
        for lane in self.lanes.values():
            self.sending -= {message.key for message in lane.drop(lambda message: unwanted(message.partition))}

    async def _level(self) -> None:
        """Before reading newly given partitions, fold every delivery record already acked (the previous
        owner's included, acked before it let go), so no alert it attempted is attempted again here."""
        topic = self.settings.topic("deliveries")
        ends = await self.offsets.end_offsets(await partitions(self.offsets, topic))
        await self.deliveries_follower.reached(ends)

    async def _commit(self, which: set[TopicPartition]) -> None:
        if self.consumer is None:
            return
        offsets = {}
        for partition in which:
            at = self.reading.committable(partition)
            if at is not None and self.committed.get(partition) != at:
                offsets[partition] = at
        if not offsets:
            return
        try:
            await self.consumer.commit(offsets)
        except KafkaError as exc:
            # The next commit covers these offsets; a rebalance makes the next owner re-read, never re-deliver.
            log.warning("alerts offsets not committed", extra={"error": type(exc).__name__})
            return
        self.committed.update(offsets)

    async def _heartbeat(self, stop: asyncio.Event) -> None:
        """Progress for operators (and tests): how far into each alerts partition this instance has handled
        every alert (its delivery record acked), for the partitions it holds."""
        while not stop.is_set():
            positions = {}
            if self.consumer is not None:
                for partition in list(self.owned):
                    at = self.reading.committable(partition)
                    if at is None:
                        with contextlib.suppress(KafkaError):
                            at = await self.consumer.position(partition)
                    if at is not None:
                        positions[partition] = at
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
    freeze_startup_objects()
    await alerting.run(stop)
