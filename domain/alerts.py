"""Alerts (docs/api.md, Alert delivery): fixed severities, deterministic ids, the envelope receivers get."""

from __future__ import annotations

from typing import Any

import msgspec

from domain.facts import LastCall
from domain.ids import deterministic_id
from domain.times import format_ms, parse_ms

SEVERITY = {
    "caller.rate_exceeded": "threat",
    "caller.rotating_numbers": "critical",
    "number.prefix_cluster": "threat",
    "number.country_burst": "threat",
    "number.geo_cluster": "threat",
    "number.volume_exceeded": "critical",
    "number.volume_spike": "critical",
    "number.volume_normal": "info",
    "number.spend_exceeded": "critical",
    "call.long_running": "threat",
    "call.suspicious": "critical",
    "platform.degraded": "critical",
    "platform.screening_unavailable": "critical",
    "billing.payment_failed": "info",
    "outbound.destination_burst": "threat",
    "outbound.paused": "critical",
    # Sent by an owner from the dashboard to check the channels: critical so no floor holds it back.
    "alert.test": "critical",
}
SEVERITY_RANK = {"info": 0, "threat": 1, "critical": 2}
ENVELOPE = ("id", "type", "account_id", "created_at", "data")


class Alert(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """A record of the alerts topic (schemas/alert.schema.json): the envelope, its severity and subject."""

    id: str
    type: str
    account_id: str
    created_at: str
    severity: str
    subject: str
    data: dict[str, Any]
    # The carrier's id of a gated call the alerting role ends (`hung_up: true`), and the carrier account
    # (`AccountSid`) of the signed form that reported it; never in the envelope.
    hang_up: str | None = None
    carrier_account_sid: str | None = None

    def envelope(self) -> dict[str, Any]:
        """The body receivers get (docs/api.md)."""
        return {
            "id": self.id,
            "type": self.type,
            "account_id": self.account_id,
            "created_at": self.created_at,
            "data": self.data,
        }


def alert_id(account: str, kind: str, subject: str, window_start: int) -> str:
    """Same (account, type, subject, window start) gives the same id, so a replay makes the same ids."""
    return deterministic_id("alrt_", 20, account, kind, subject, str(window_start))


def make_alert(account: str, kind: str, subject: str, window_start: int, raised_at: int, data: dict[str, Any]) -> Alert:
    """`raised_at` is when it was raised: the edge's receipt time of the event that raised it, or a tick's."""
    return Alert(
        id=alert_id(account, kind, subject, window_start),
        type=kind,
        account_id=account,
        created_at=format_ms(raised_at),
        severity=SEVERITY[kind],
        subject=subject,
        data=data,
    )


class AlertTestRequest(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """An owner's request for an `alert.test` (schemas/accounts.schema.json, kind `alert.test_requested`)."""

    id: str
    account_id: str
    at: str
    person_id: str
    email: str


TEST_REQUESTED = "alert.test_requested"


def requested_test(request: AlertTestRequest) -> Alert:
    """The `alert.test` a request asks for: its id from the request's, so a refold makes the same one."""
    return Alert(
        id=deterministic_id("alrt_", 20, request.account_id, "alert.test", request.id),
        type="alert.test",
        account_id=request.account_id,
        created_at=request.at,
        severity=SEVERITY["alert.test"],
        subject=request.person_id,
        data={"requested_by": request.email},
    )


class ScreeningLost(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """An edge's report that one of the account's gated calls got no score in time and took its number's
    `unavailable` choice (schemas/accounts.schema.json, kind `screening.unavailable`)."""

    id: str
    account_id: str
    at: str
    number: str
    choice: str


SCREENING_LOST = "screening.unavailable"


def screening_unavailable(report: ScreeningLost, cooldown_ms: int) -> Alert:
    """`platform.screening_unavailable`, once per cooldown window of the account: every edge's report of
    one outage makes the same id, which every consumer counts once."""
    at = parse_ms(report.at) or 0
    return make_alert(
        report.account_id,
        "platform.screening_unavailable",
        report.account_id,
        at - at % cooldown_ms,
        at,
        {"number": report.number, "choice": report.choice},
    )


def with_prior(data: dict[str, Any], last: LastCall | None) -> dict[str, Any]:
    """An alert's data about a caller, with `prior`: what the caller scored last time and how many days
    before this call, when it had a record."""
    if last is not None:
        data["prior"] = {"score": last.score, "days": last.days}
    return data


def callers_named(alert: Alert) -> list[str]:
    """The callers an alert charges points to (`prior.points`): the caller it names, or its run."""
    if alert.type == "caller.rotating_numbers":
        return [str(n) for n in alert.data.get("numbers", [])]
    caller = alert.data.get("caller")
    return [str(caller)] if caller else []
