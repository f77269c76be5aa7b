"""Intake: the alerts topic, read in the alerting role's consumer group, and the deliveries topic read back.

Instances share the alerts partitions in one consumer group (`<topic_prefix>.alerting`) and start from
its committed offsets, committing only up to the first alert whose first delivery record is not acked
(alerting.offsets).

Each alert is decoded once and handed to its hang-up, its messages and its webhook delivery; each
record read back from the deliveries topic goes to the one of them it is about, which then never acts
on it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError

from alerting.channels import Channels
from alerting.hang_ups import HangUps
from alerting.ledger import Ledger, Read
from alerting.webhooks import Webhooks
from domain.alerts import Alert
from domain.facts import AnyDelivery, ChannelAttempt, ChannelOutcome, ChannelSkipped, HangUpAttempt, HangUpOutcome
from domain.times import parse_ms
from infra.follow import TopicFollower
from infra.kafka import make_consumer, partitions, until_coordinator
from infra.membership import leave_group_on_stop
from infra.settings import Settings

log = logging.getLogger("callscreen.alerting")

_alerts = msgspec.json.Decoder(Alert)


class Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    """Hands the consumer group's partition changes to the intake."""

    def __init__(self, intake: Intake) -> None:
        self.intake = intake

    async def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        await self.intake.release(set(revoked))

    async def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        self.intake.assigned |= set(assigned)


class Intake:
    """Reads the alerts partitions the group gives this instance and commits what their alerts' records settle."""

    def __init__(
        self, settings: Settings, ledger: Ledger, webhooks: Webhooks, channels: Channels, hang_ups: HangUps
    ) -> None:
        self.settings = settings
        self.ledger = ledger
        self.webhooks = webhooks
        self.channels = channels
        self.hang_ups = hang_ups
        self.deliveries = TopicFollower(settings, settings.topic("deliveries"), self.fold)
        # Lag and the deliveries' end offsets are read on a consumer that never fetches, so it never waits
        # out a follower's long poll.
        self.offsets = make_consumer(settings)
        self.consumer: AIOKafkaConsumer | None = None
        # Partitions the group gave this instance; those of them it reads are the ledger's `owned` (after
        # levelling, below).
        self.assigned: set[TopicPartition] = set()
        # Counts revocations: a batch read across one is dropped (its partitions restart at the commit).
        self.generation = 0
        self.committed: dict[TopicPartition, int] = {}

    def fold(self, record: dict[str, Any]) -> None:
        """A deliveries record read back (any instance's, in any run), to the work it is about."""
        # The follower hands on JSON objects; one of no known kind raises, and the follower skips it.
        delivery = msgspec.convert(record, AnyDelivery)
        if isinstance(delivery, HangUpAttempt | HangUpOutcome):
            self.hang_ups.fold(delivery)
        elif isinstance(delivery, ChannelSkipped | ChannelAttempt | ChannelOutcome):
            self.channels.fold(delivery)
        else:
            self.webhooks.fold(delivery)

    async def join(self) -> None:
        """Join the alerting consumer group, subscribed to the alerts topic."""
        group = self.settings.topic("alerting")
        await until_coordinator(self.settings, group)
        leave_group_on_stop()
        consumer = make_consumer(
            self.settings, follower=True, group_id=group, group_instance_id=self.settings.alerting_instance or None
        )
        await consumer.start()
        consumer.subscribe([self.settings.topic("alerts")], listener=Rebalance(self))
        self.consumer = consumer

    async def leave(self) -> None:
        if self.consumer is not None:
            await self.consumer.stop()

    async def read(self, stop: asyncio.Event) -> None:
        """Read alerts until `stop`, committing after each batch what its records have settled."""
        assert self.consumer is not None, "join() first"
        while not stop.is_set():
            batches = await self.consumer.getmany(timeout_ms=200)
            generation = self.generation
            fresh = (set(batches) | self.assigned) - self.ledger.owned
            if fresh:
                await self._level()
                if generation != self.generation:
                    continue
                self.ledger.owned |= fresh
            for partition, messages in batches.items():
                for message in messages:
                    self.take(partition, message.offset, _alerts.decode(message.value))
            if self.ledger.failure is not None:
                raise self.ledger.failure
            await self.commit(self.ledger.owned)

    def take(self, partition: TopicPartition, offset: int, alert: Alert) -> None:
        """Hand one alert read to its hang-up, its messages and its webhook delivery."""
        if partition not in self.ledger.owned:
            return
        # The read holds the offset for the webhook delivery; each message queued holds it once more.
        self.ledger.reading.read(partition, offset)
        read = Read(partition, offset, alert, parse_ms(alert.created_at) or 0)
        self.hang_ups.take(read)
        self.channels.take(read)
        self.webhooks.take(read)

    async def release(self, revoked: set[TopicPartition]) -> None:
        """Partitions taken away: drop their queued work, wait for their records' acks, commit, forget."""
        self.generation += 1
        self.assigned -= revoked
        self.ledger.owned -= revoked
        self.drop(lambda partition: partition in revoked)
        if self.ledger.writes:
            await asyncio.wait(set(self.ledger.writes))
        await self.commit(revoked)
        self.ledger.reading.forget(revoked)
        for partition in revoked:
            self.committed.pop(partition, None)

    def drop(self, unwanted: Callable[[TopicPartition], bool]) -> None:
        """Forget the queued deliveries and messages of alerts read from `unwanted` partitions."""
        self.webhooks.drop(unwanted)
        self.channels.drop(unwanted)

    async def _level(self) -> None:
        """Before reading newly given partitions, fold every delivery record already acked (the previous
        owner's included, acked before it let go), so no alert it attempted is attempted again here."""
        topic = self.settings.topic("deliveries")
        ends = await self.offsets.end_offsets(await partitions(self.offsets, topic))
        await self.deliveries.reached(ends)

    async def commit(self, which: set[TopicPartition]) -> None:
        if self.consumer is None:
            return
        offsets = {}
        for partition in which:
            at = self.ledger.reading.committable(partition)
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

    async def positions(self) -> dict[TopicPartition, int]:
        """How far into each alerts partition held here every alert is handled (its delivery records acked)."""
        positions: dict[TopicPartition, int] = {}
        if self.consumer is None:
            return positions
        for partition in list(self.ledger.owned):
            at = self.ledger.reading.committable(partition)
            if at is None:
                with contextlib.suppress(KafkaError):
                    at = await self.consumer.position(partition)
            if at is not None:
                positions[partition] = at
        return positions
