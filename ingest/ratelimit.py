"""Token buckets for the request limits of docs/api.md, Limits."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class Bucket:
    tokens: float
    updated: float


@dataclass
class RateLimiter:
    """`limit` requests per `window_s`, refilled continuously; one bucket per subject."""

    limit: int
    window_s: float = 60.0
    buckets: dict[str, Bucket] = field(default_factory=dict)

    def _refilled(self, subject: str, now: float) -> Bucket:
        bucket = self.buckets.get(subject)
        if bucket is None:
            bucket = self.buckets[subject] = Bucket(tokens=float(self.limit), updated=now)
        bucket.tokens = min(float(self.limit), bucket.tokens + (now - bucket.updated) * self.limit / self.window_s)
        bucket.updated = now
        return bucket

    def take(self, subject: str, now: float) -> float:
        """Spend one token: 0.0 when allowed, else the seconds until one is available."""
        rate = self.limit / self.window_s
        bucket = self._refilled(subject, now)
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / rate

    def remaining(self, subject: str, now: float) -> float:
        """Tokens left for `subject` as this edge knows them."""
        return self._refilled(subject, now).tokens

    def debit(self, subject: str, spent: int, now: float) -> None:
        """Spend what another edge admitted for the same subject; the debt is bounded by one window."""
        bucket = self._refilled(subject, now)
        bucket.tokens = max(-float(self.limit), bucket.tokens - spent)


@dataclass
class UsageLedger:
    """What this edge admitted per subject since it last told the other edges."""

    counts: dict[str, int] = field(default_factory=dict)

    def add(self, subject: str, amount: int = 1) -> None:
        self.counts[subject] = self.counts.get(subject, 0) + amount

    def drain(self) -> dict[str, int]:
        counts, self.counts = self.counts, {}
        return counts


@dataclass
class DailyQuota:
    """At most `limit` units per subject per UTC day (the day is an index, `epoch_s // 86400`)."""

    limit: int
    used: dict[str, tuple[int, int]] = field(default_factory=dict)

    def _today(self, subject: str, day: int) -> int:
        seen_day, used = self.used.get(subject, (day, 0))
        return used if seen_day == day else 0

    def charge(self, subject: str, amount: int, day: int) -> bool:
        """Spend `amount` when it fits in the day's quota; False (and nothing spent) when it does not."""
        used = self._today(subject, day)
        if used + amount > self.limit:
            return False
        self.used[subject] = (day, used + amount)
        return True

    def debit(self, subject: str, amount: int, day: int) -> None:
        """Spend what another edge accepted for the same subject on the same day."""
        self.used[subject] = (day, self._today(subject, day) + amount)


def retry_after(wait_s: float) -> str:
    return str(max(1, math.ceil(wait_s)))
