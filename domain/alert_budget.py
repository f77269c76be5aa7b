"""How many alerts an account may have delivered per minute (docs/api.md, Alert delivery), and, with an
hour's window, how many texts and voice calls (docs/api.md, Alert channels).

Counted in the alerts' own time, their `created_at`, never a clock: the same alerts in the same order get
the same answers, whenever and however often they are read. The window slides: an alert is admitted when
fewer than `per_minute` admitted alerts of its account were created in the window (a minute) up to it.
"""

from __future__ import annotations

import bisect

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
# How far behind an account's newest alert admitted alerts are remembered, in windows; older ones can no
# longer count.
KEEP_WINDOWS = 10
KEEP_MS = KEEP_WINDOWS * MINUTE_MS


class AlertBudget:
    """Admitted alerts per account, by creation time, deduplicated by alert id."""

    def __init__(self, per_minute: int, window_ms: int = MINUTE_MS) -> None:
        if per_minute < 1:
            raise ValueError("per_minute must be at least 1")
        self.per_minute = per_minute
        self.window_ms = window_ms
        # Per account: admitted alerts' creation times, sorted, and the ids counted.
        self.times: dict[str, list[int]] = {}
        self.ids: dict[str, dict[str, int]] = {}

    def admit(self, account: str, alert_id: str, created_at: int) -> bool:
        """True, and the alert counted, when the account's minute up to `created_at` has room for it.

        An alert already counted is admitted again (a second reading of the same alert).
        """
        if alert_id in self.ids.get(account, {}):
            return True
        if self.in_window(account, created_at) >= self.per_minute:
            return False
        self.note(account, alert_id, created_at)
        return True

    def note(self, account: str, alert_id: str, created_at: int) -> None:
        """Count an alert admitted elsewhere (another instance, an earlier run), whatever the budget says."""
        ids = self.ids.setdefault(account, {})
        if alert_id in ids:
            return
        times = self.times.setdefault(account, [])
        bisect.insort(times, created_at)
        ids[alert_id] = created_at
        self._forget(account)

    def in_window(self, account: str, created_at: int) -> int:
        """Admitted alerts of the account created in (created_at - the window, created_at]."""
        times = self.times.get(account, [])
        return bisect.bisect_right(times, created_at) - bisect.bisect_right(times, created_at - self.window_ms)

    def _forget(self, account: str) -> None:
        times = self.times[account]
        horizon = times[-1] - KEEP_WINDOWS * self.window_ms
        if times[0] >= horizon:
            return
        cut = bisect.bisect_left(times, horizon)
        del times[:cut]
        ids = self.ids[account]
        for alert_id in [i for i, at in ids.items() if at < horizon]:
            del ids[alert_id]
