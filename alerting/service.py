"""The alerting role: reads the alerts topic and delivers each alert at most once.

Its parts: the intake (alerting.intake) reads the alerts and hands each to its webhook delivery
(alerting.webhooks), its email, text and voice messages (alerting.channels) and the hang-up of the call
it names (alerting.hang_ups), which keep their records on the deliveries topic (alerting.ledger).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid

import aiohttp
import orjson
from aiokafka.errors import KafkaError

from alerting.channels import Channels
from alerting.hang_ups import HangUps
from alerting.intake import Intake
from alerting.ledger import Ledger
from alerting.metrics import AlertingMetrics
from alerting.webhooks import Webhooks
from domain.accounts import AccountsView, apply
from infra.follow import TopicFollower
from infra.heap import freeze_startup_objects
from infra.kafka import make_producer
from infra.metrics import record_lag, serve
from infra.resolver import resolver_for
from infra.sealing import sealer_for
from infra.settings import Settings
from infra.webhook_url import tls_context

log = logging.getLogger("callscreen.alerting")


class Alerting:
    """One instance of the alerting role: its parts, wired."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.instance = uuid.uuid4().hex[:12]
        sealer = sealer_for(settings)
        self.accounts = AccountsView()
        self.accounts_follower = TopicFollower(settings, settings.topic("accounts"), lambda r: apply(self.accounts, r))
        self.producer = make_producer(settings)
        self.metrics = AlertingMetrics()
        self.ledger = Ledger(settings, self.producer)
        self.webhooks = Webhooks(settings, self.accounts, sealer, self.ledger, self.metrics)
        self.channels = Channels(settings, self.accounts, self.ledger, self.metrics)
        self.hang_ups = HangUps(settings, self.accounts, sealer, self.ledger, self.metrics)
        self.intake = Intake(settings, self.ledger, self.webhooks, self.channels, self.hang_ups)

    async def run(self, stop: asyncio.Event) -> None:
        await self.producer.start()
        await self.accounts_follower.start()
        await self.intake.deliveries.start()
        await self.accounts_follower.caught_up()
        await self.intake.deliveries.caught_up()
        await self.intake.offsets.start()
        connector = aiohttp.TCPConnector(
            ssl=tls_context(self.settings.webhook_ca_file), limit=0, resolver=resolver_for(self.settings)
        )
        await self.intake.join()
        heartbeat = asyncio.create_task(self._heartbeat(stop))
        try:
            carrier_connector = aiohttp.TCPConnector(ssl=tls_context(self.settings.webhook_ca_file))
            async with (
                aiohttp.ClientSession(connector=connector) as session,
                aiohttp.ClientSession(connector=carrier_connector) as carrier,
            ):
                self.hang_ups.carrier = carrier
                dispatchers = [
                    asyncio.create_task(self.webhooks.dispatch(session)),
                    asyncio.create_task(self.channels.dispatch(carrier)),
                ]
                try:
                    await self.intake.read(stop)
                finally:
                    for dispatcher in dispatchers:
                        dispatcher.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await dispatcher
                # What is still queued stays uncommitted: the next owner of its partition delivers it.
                self.intake.drop(lambda _: True)
                working = self.webhooks.tasks | self.channels.tasks | self.hang_ups.tasks
                if working:
                    await asyncio.wait(working, timeout=self.settings.webhook_timeout_s)
                if self.ledger.writes:
                    await asyncio.wait(self.ledger.writes)
                await self.intake.commit(self.ledger.owned)
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
            await self.intake.leave()
            await self.intake.offsets.stop()
            await self.intake.deliveries.stop()
            await self.accounts_follower.stop()
            await self.producer.stop()

    async def _heartbeat(self, stop: asyncio.Event) -> None:
        """Progress for operators (and tests): how far into each alerts partition this instance has handled
        every alert (its delivery record acked), for the partitions it holds."""
        while not stop.is_set():
            positions = await self.intake.positions()
            await record_lag(self.metrics.lag, "alerting", self.intake.offsets, positions)
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
