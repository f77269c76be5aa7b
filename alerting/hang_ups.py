"""Hang-ups: the gated call a `call.suspicious` alert names, ended by the carrier at once and asked once.

A `call.suspicious` alert that names a gated call to end (`hang_up`) is acted on at once, outside the
queues: a `hangup.attempt` record, the carrier's calls API, a `hangup.outcome` record (alerting.carrier).
It too is asked at most once, of the carrier account whose signed form reported the call, with the
number's own carrier auth token (alerting.carrier.hang_up_credentials).
"""

from __future__ import annotations

import asyncio
import logging

import aiohttp

from alerting.carrier import Credentials, deployment, hang_up, hang_up_credentials
from alerting.ledger import Ledger, Read, event_time
from alerting.metrics import AlertingMetrics
from domain.accounts import AccountsView
from domain.alerts import Alert
from domain.facts import HangUpAttempt, HangUpOutcome
from domain.seen import Seen
from infra.sealing import Sealer, SecretKeyProblem
from infra.settings import Settings

log = logging.getLogger("callscreen.alerting")


class HangUps:
    """The carrier asked to end each gated call an alert names."""

    def __init__(
        self, settings: Settings, accounts: AccountsView, sealer: Sealer, ledger: Ledger, metrics: AlertingMetrics
    ) -> None:
        self.settings = settings
        self.accounts = accounts
        self.sealer = sealer
        self.ledger = ledger
        self.metrics = metrics
        # Alerts whose gated call the carrier was asked to end (any `hangup.*` record), by their alerts'
        # `created_at`; bounded as the webhook's handled alerts are.
        self.hung_up: Seen[str] = Seen(settings.alerting_seen_max)
        self.tasks: set[asyncio.Task[None]] = set()
        # The carrier's session, opened by the role's run before the first alert is read.
        self.carrier: aiohttp.ClientSession | None = None

    def fold(self, record: HangUpAttempt | HangUpOutcome) -> None:
        """A `hangup.*` record read back: its alert's call is not asked for again."""
        self.hung_up.add(record.alert_id, event_time(record))

    def take(self, read: Read) -> None:
        """Start ending the gated call the alert names, unless the carrier was asked already."""
        alert = read.alert
        if not alert.hang_up or self.hung_up.seen(alert.id, read.created_ms):
            return
        # Noted before the task runs, so a copy of the alert later in the same batch starts nothing.
        self.hung_up.add(alert.id, read.created_ms)
        task = asyncio.create_task(self._hang_up(alert, alert.hang_up))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _hang_up(self, alert: Alert, call_sid: str) -> None:
        """The attempt on record first, so the carrier is never asked twice; then the request, then its outcome."""
        await self.ledger.append(HangUpAttempt(alert_id=alert.id, account_id=alert.account_id, call_sid=call_sid))
        assert self.carrier is not None, "run() opens it before the first alert is read"
        outcome = await hang_up(self.carrier, self.settings, self._credentials(alert), call_sid)
        label = "ended" if outcome.ok else outcome.error or "failed"
        self.metrics.hang_ups.labels(label).inc()
        log.info("hang-up", extra={"alert_id": alert.id, "outcome": label, "ms": outcome.duration_ms})
        await self.ledger.append(
            HangUpOutcome(
                alert_id=alert.id,
                account_id=alert.account_id,
                ended=outcome.ok,
                status=outcome.status,
                error=outcome.error,
                duration_ms=outcome.duration_ms,
            )
        )

    def _credentials(self, alert: Alert) -> Credentials | None:
        """The carrier account the alert's signed form named, with its number's auth token opened now (or
        the deployment's for the same account); None makes the attempt `unconfigured`, with no request."""
        account = self.accounts.accounts.get(alert.account_id)
        gate = account.gates.get(str(alert.data.get("number", ""))) if account is not None else None
        token = ""
        if gate is not None and gate.carrier_auth_token:
            try:
                token = self.sealer.open(gate.carrier_auth_token)
            except SecretKeyProblem as exc:
                log.warning("cannot open a carrier auth token", extra={"alert_id": alert.id, "error": str(exc)})
        return hang_up_credentials(alert.carrier_account_sid or "", token, deployment(self.settings))
