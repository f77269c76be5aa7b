"""Email, text and voice messages: each alert fanned out to its account's destinations, each sent once.

Each alert also fans out to the account's email, text and voice destinations (domain.channels): one
`channel.attempt` record per (alert, channel, destination) before its send (alerting.smtp,
alerting.carrier), or a `channel.skipped` record with the reason (below the floor, past the hourly cap,
the deployment lacks the channel's settings, the queue is full). Each channel has its own fair queues,
so a slow SMTP server or carrier API holds up neither webhooks nor another account's messages.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
import msgspec
from aiokafka import TopicPartition

from alerting import messages, smtp
from alerting.carrier import Answered, place_call, send_text
from alerting.ledger import Ledger, Read, event_time
from alerting.metrics import AlertingMetrics
from domain.accounts import AccountsView
from domain.alert_budget import HOUR_MS, AlertBudget
from domain.channels import CHANNELS, Send, fan_out, on_plan
from domain.facts import ChannelAttempt, ChannelOutcome, ChannelSkipped
from domain.fairness import FairQueues
from domain.seen import Seen
from domain.times import parse_ms
from infra.settings import Settings
from infra.webhook_url import tls_context

log = logging.getLogger("callscreen.alerting")


@dataclass(frozen=True)
class Message:
    """An email, text or voice message waiting in its channel's queue, and the alert it is about."""

    read: Read
    channel: str
    to: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.read.alert.id, self.channel, self.to)


def hourly_id(alert_id: str, to: str) -> str:
    """What the hourly caps count: one message of one alert to one destination."""
    return f"{alert_id}|{to}"


class Channels:
    """Each alert's messages to its account's email, text and voice destinations."""

    def __init__(self, settings: Settings, accounts: AccountsView, ledger: Ledger, metrics: AlertingMetrics) -> None:
        self.settings = settings
        self.accounts = accounts
        self.ledger = ledger
        self.metrics = metrics
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
        # (alert, channel, destination) with any `channel.*` record, by their alerts' `created_at` (bounded as
        # the webhook's handled alerts are), and those queued or being sent here (as many as the lanes hold).
        self.sent: Seen[tuple[str, str, str]] = Seen(settings.alerting_seen_max)
        self.sending: set[tuple[str, str, str]] = set()
        self.wake = asyncio.Event()
        self.tasks: set[asyncio.Task[None]] = set()

    def fold(self, record: ChannelSkipped | ChannelAttempt | ChannelOutcome) -> None:
        """A `channel.*` record read back: its message is not sent again, and an attempt (any instance's, in
        any run) counts against its account's hourly cap."""
        self.sent.add((record.alert_id, record.channel, record.to), event_time(record))
        hourly = self.hourly.get(record.channel)
        created = parse_ms(record.created_at) if isinstance(record, ChannelAttempt) else None
        if hourly is not None and created is not None:
            hourly.note(record.account_id, hourly_id(record.alert_id, record.to), created)

    def take(self, read: Read) -> None:
        """Queue or skip the alert's message to each email, text and voice destination not yet handled;
        each holds the alert's offset until its first record is acked."""
        alert = read.alert
        account = self.accounts.accounts.get(alert.account_id)
        if account is None:
            return
        for plan in fan_out(on_plan(account.channels, account.plan), alert.severity, self.available):
            message = Message(read, plan.channel, plan.to)
            if self.sent.seen(message.key, read.created_ms) or message.key in self.sending:
                continue
            if not isinstance(plan, Send):
                self._skip(message, plan.reason)
                continue
            hourly = self.hourly.get(plan.channel)
            counted = hourly_id(alert.id, plan.to)
            if hourly is not None and not hourly.admit(alert.account_id, counted, read.created_ms):
                self._skip(message, "rate")
            elif not self.lanes[plan.channel].offer(alert.account_id, message):
                self._skip(message, "queue_full")
            else:
                self.ledger.reading.hold(read.partition, read.offset)
                self.sending.add(message.key)
                self.wake.set()

    def drop(self, unwanted: Callable[[TopicPartition], bool]) -> None:
        """Forget the queued messages of alerts read from `unwanted` partitions."""
        for lane in self.lanes.values():
            self.sending -= {message.key for message in lane.drop(lambda message: unwanted(message.read.partition))}

    async def dispatch(self, carrier: aiohttp.ClientSession) -> None:
        """Start messages as each channel's fair queues allow, round-robin across accounts."""
        while True:
            started = False
            for lane in self.lanes.values():
                if (picked := lane.next()) is not None:
                    task = asyncio.create_task(self._send(carrier, *picked))
                    self.tasks.add(task)
                    task.add_done_callback(self.tasks.discard)
                    started = True
            if not started:
                self.wake.clear()
                await self.wake.wait()

    def _first(self, message: Message, record: ChannelSkipped | ChannelAttempt) -> asyncio.Task[None]:
        """The message's first `channel.*` record: noted at once, so no copy read meanwhile sends it."""
        self.sent.add(message.key, message.read.created_ms)
        return self.ledger.first(message.read, record)

    def _skip(self, message: Message, reason: str) -> None:
        alert = message.read.alert
        skipped = ChannelSkipped(
            alert_id=alert.id, account_id=alert.account_id, channel=message.channel, to=message.to, reason=reason
        )
        self.ledger.reading.hold(message.read.partition, message.read.offset)
        self._first(message, skipped)
        self.metrics.channel_messages.labels(message.channel, f"skipped_{reason}").inc()

    async def _send(self, carrier: aiohttp.ClientSession, account_id: str, message: Message) -> None:
        """One email, text or voice message: its attempt on record first, then the send, then its outcome."""
        alert = message.read.alert
        try:
            if message.read.partition not in self.ledger.owned:
                return  # revoked while it waited: the partition's next owner reads it again
            attempt = ChannelAttempt(
                alert_id=alert.id,
                account_id=account_id,
                channel=message.channel,
                to=message.to,
                created_at=alert.created_at,
            )
            await self._first(message, attempt)
            answered = await self._transmit(carrier, message)
            label = "delivered" if answered.ok else answered.error or "failed"
            self.metrics.channel_messages.labels(message.channel, label).inc()
            log.info(
                "message",
                extra={"alert_id": alert.id, "channel": message.channel, "outcome": label, "ms": answered.duration_ms},
            )
            outcome = ChannelOutcome(
                alert_id=alert.id,
                account_id=account_id,
                channel=message.channel,
                to=message.to,
                delivered=answered.ok,
                status=answered.status,
                error=answered.error,
                duration_ms=answered.duration_ms,
            )
            await self.ledger.append(outcome)
        finally:
            self.lanes[message.channel].done(account_id)
            self.sending.discard(message.key)
            self.wake.set()

    async def _transmit(self, carrier: aiohttp.ClientSession, message: Message) -> Answered:
        # The words are written from the alert as the alerts topic carries it (alerting.messages).
        about = messages.about(msgspec.structs.asdict(message.read.alert), self.settings.dashboard_url)
        if message.channel == "email":
            if self.smtp_server is None:
                return Answered(False, None, "unconfigured", 0)  # an SMTP URL that names no host
            mail = messages.email(about, self.settings.email_from, message.to)
            return await smtp.send(self.smtp_server, mail, self.settings.email_timeout_s, self.smtp_tls)
        if message.channel == "text":
            return await send_text(carrier, self.settings, message.to, messages.text(about))
        return await place_call(carrier, self.settings, message.to, messages.voice_twiml(about))
