"""`platform.screening_unavailable`: every edge's report of one outage makes one alert."""

from __future__ import annotations

from domain.alerts import ScreeningLost, screening_unavailable
from domain.rules import MIN_MS

COOLDOWN_MS = 15 * MIN_MS


def report(report_id: str, at: str, number: str = "+14155550177") -> ScreeningLost:
    return ScreeningLost(id=report_id, account_id="acct_0123456789abcdef", at=at, number=number, choice="forward")


def test_reports_within_one_window_are_one_alert_and_the_next_window_another() -> None:
    first = screening_unavailable(report("a", "2026-12-01T10:01:00.000Z"), COOLDOWN_MS)
    again = screening_unavailable(report("b", "2026-12-01T10:14:59.000Z", "+14155550178"), COOLDOWN_MS)
    later = screening_unavailable(report("c", "2026-12-01T10:15:00.000Z"), COOLDOWN_MS)
    assert (first.type, first.severity, first.subject) == (
        "platform.screening_unavailable",
        "critical",
        "acct_0123456789abcdef",
    )
    assert first.data == {"number": "+14155550177", "choice": "forward"}
    assert first.created_at == "2026-12-01T10:01:00.000Z"
    assert first.id == again.id != later.id
