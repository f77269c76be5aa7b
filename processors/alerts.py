"""Alert records (interface section 6): fixed severities, deterministic ids, cooldown keys."""

from __future__ import annotations

from typing import Any

from callscreen.ids import deterministic_id
from callscreen.times import format_ms

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
    "billing.payment_failed": "info",
}


def alert_id(account: str, kind: str, subject: str, window_start: int) -> str:
    """Same (account, type, subject, window start) gives the same id, so a replay makes the same ids."""
    return deterministic_id("alrt_", 20, account, kind, subject, str(window_start))


def make_alert(
    account: str, kind: str, subject: str, window_start: int, at: int, data: dict[str, Any]
) -> dict[str, Any]:
    return {
        "id": alert_id(account, kind, subject, window_start),
        "type": kind,
        "account_id": account,
        "created_at": format_ms(at),
        "severity": SEVERITY[kind],
        "subject": subject,
        "data": data,
    }
