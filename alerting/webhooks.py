"""Webhook delivery: each alert's envelope, signed and POSTed once to its account's URL.

Before a POST it appends a `delivery.attempt` record to the deliveries topic and waits for the
ack; every alert id with any delivery record is never attempted again. A crash between the POST
and its outcome therefore loses the outcome (the alert stays `delivered.webhook: false`) but never
delivers twice, and a replay of the alerts topic delivers nothing.

Deliveries wait in per-account queues served round-robin (domain.fairness) under an alert budget per
account (domain.alert_budget), so one account's receiver or flood delays no other.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import aiohttp
import orjson
from aiokafka import TopicPartition

from alerting.delivery import Policy, deliver
from alerting.ledger import Ledger, Read, event_time
from alerting.metrics import AlertingMetrics, outcome_label
from domain.accounts import Account, AccountsView
from domain.alert_budget import AlertBudget
from domain.alerts import Alert
from domain.facts import DeliveryAttempt, DeliveryOutcome, DeliverySkipped
from domain.fairness import FairQueues
from domain.seen import Seen
from domain.times import parse_ms
from infra.clock import now_ms
from infra.sealing import Sealer
from infra.settings import Settings

log = logging.getLogger("callscreen.alerting")


def envelope_bytes(alert: Alert) -> bytes:
    """The body receivers get: the envelope of docs/api.md, serialised once and signed as is."""
    return orjson.dumps(alert.envelope())


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


class Webhooks:
    """Each alert's delivery to its account's webhook: skipped on record, or queued and POSTed once."""

    def __init__(
        self, settings: Settings, accounts: AccountsView, sealer: Sealer, ledger: Ledger, metrics: AlertingMetrics
    ) -> None:
        self.accounts = accounts
        self.sealer = sealer
        self.ledger = ledger
        self.metrics = metrics
        self.policy = Policy(settings.webhook_timeout_s, settings.webhook_ports, settings.webhook_allow_private)
        self.queues: FairQueues[Read] = FairQueues(
            settings.webhook_concurrency, settings.webhook_account_concurrency, settings.webhook_queue_limit
        )
        self.budget = AlertBudget(settings.alerts_per_minute)
        # Alert ids with any `delivery.*` record, by their alerts' `created_at`. Bounded (domain.seen): past
        # `alerting_seen_max` the oldest are forgotten and every alert as old counts as handled, so a bound
        # never delivers twice.
        self.handled: Seen[str] = Seen(settings.alerting_seen_max)
        # Alerts queued or being delivered here: a copy read again meanwhile (a refold appends one) is not queued.
        self.queued: set[str] = set()
        self.wake = asyncio.Event()
        self.tasks: set[asyncio.Task[None]] = set()

    def fold(self, record: DeliverySkipped | DeliveryAttempt | DeliveryOutcome) -> None:
        """A `delivery.*` record read back: its alert is not delivered again, and an attempt (any instance's,
        in any run) counts against its account's budget."""
        self.handled.add(record.alert_id, event_time(record))
        created = parse_ms(record.created_at) if isinstance(record, DeliveryAttempt) else None
        if created is not None:
            self.budget.note(record.account_id, record.alert_id, created)

    def take(self, read: Read) -> None:
        """Decide what becomes of an alert read: nothing (already handled), skipped, or queued. Its read
        holds its offset until then."""
        alert = read.alert
        if self.handled.seen(alert.id, read.created_ms) or alert.id in self.queued:
            if alert.id not in self.handled and alert.id not in self.queued:
                # Older than every alert remembered: maybe handled before it was forgotten, so never sent.
                self.metrics.deliveries.labels("stale").inc()
            self.ledger.reading.settle(read.partition, read.offset)
            return
        account = self.accounts.accounts.get(alert.account_id)
        if account is None or not account.alert_webhook_url:
            self._skip(read, "no_webhook_url", "skipped")
        elif not self.queues.room(alert.account_id):
            self._skip(read, "queue_full", "queue_full")
        elif not self.budget.admit(alert.account_id, alert.id, read.created_ms):
            self._skip(read, "rate_limited", "rate_limited")
        else:
            self.queues.offer(alert.account_id, read)
            self.queued.add(alert.id)
            self.wake.set()

    def drop(self, unwanted: Callable[[TopicPartition], bool]) -> None:
        """Forget the queued deliveries of alerts read from `unwanted` partitions."""
        dropped = self.queues.drop(lambda read: unwanted(read.partition))
        self.queued -= {read.alert.id for read in dropped}

    async def dispatch(self, session: aiohttp.ClientSession) -> None:
        """Start deliveries as the fair queues allow, round-robin across accounts."""
        while True:
            picked = self.queues.next()
            if picked is None:
                self.wake.clear()
                await self.wake.wait()
                continue
            account_id, read = picked
            task = asyncio.create_task(self._deliver(session, account_id, read))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    def _first(self, read: Read, record: DeliverySkipped | DeliveryAttempt) -> asyncio.Task[None]:
        """The alert's first `delivery.*` record: noted at once, so no copy read meanwhile is delivered."""
        self.handled.add(read.alert.id, read.created_ms)
        return self.ledger.first(read, record)

    def _skip(self, read: Read, reason: str, label: str) -> asyncio.Task[None]:
        alert = read.alert
        written = self._first(read, DeliverySkipped(alert_id=alert.id, account_id=alert.account_id, reason=reason))
        self.metrics.deliveries.labels(label).inc()
        return written

    async def _deliver(self, session: aiohttp.ClientSession, account_id: str, read: Read) -> None:
        alert = read.alert
        try:
            if read.partition not in self.ledger.owned:
                return  # revoked while it waited: the partition's next owner reads it again
            account = self.accounts.accounts.get(account_id)
            url = account.alert_webhook_url if account is not None else None
            if account is None or not url:
                await self._skip(read, "no_webhook_url", "skipped")
                return
            # The alert's created_at rides on the attempt so every instance's budget can count it.
            await self._first(
                read, DeliveryAttempt(alert_id=alert.id, account_id=account_id, created_at=alert.created_at)
            )
            outcome = await deliver(
                session, url, envelope_bytes(alert), signing_secrets(account, now_ms(), self.sealer), self.policy
            )
            self.metrics.deliveries.labels(outcome_label(outcome.delivered, outcome.status, outcome.error)).inc()
            self.metrics.delivery_seconds.observe(outcome.duration_ms / 1000)
            log.info(
                "delivery",
                extra={
                    "alert_id": alert.id,
                    "delivered": outcome.delivered,
                    "status": outcome.status,
                    "error": outcome.error,
                    "ms": outcome.duration_ms,
                },
            )
            await self.ledger.append(
                DeliveryOutcome(
                    alert_id=alert.id,
                    account_id=account_id,
                    delivered=outcome.delivered,
                    status=outcome.status,
                    error=outcome.error,
                    duration_ms=outcome.duration_ms,
                )
            )
        finally:
            self.queues.done(account_id)
            self.queued.discard(alert.id)
            self.wake.set()
