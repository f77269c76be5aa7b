"""Token buckets for the request limits of docs/api.md, Limits."""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field


@dataclass(slots=True)
class Bucket:
    tokens: float
    updated: float


@dataclass
class RateLimiter:
    """`limit` requests per `window_s`, refilled continuously; one bucket per subject.

    A bucket that is full again is forgotten (a subject without one gets a full one), so the table holds
    only the subjects seen within the last window or two (two with another edge's debt). `max_subjects`
    (0: no bound) bounds it outright: past it the least recently seen subject is forgotten, as if full.
    """

    limit: int
    window_s: float = 60.0
    max_subjects: int = 0
    # Least recently seen first.
    buckets: OrderedDict[str, Bucket] = field(default_factory=OrderedDict)

    def _refilled(self, subject: str, now: float) -> Bucket:
        bucket = self.buckets.get(subject)
        if bucket is None:
            self._forget(now, adding=True)
            bucket = self.buckets[subject] = Bucket(tokens=float(self.limit), updated=now)
        else:
            self.buckets.move_to_end(subject)
            self._forget(now, adding=False)
        bucket.tokens = min(float(self.limit), bucket.tokens + (now - bucket.updated) * self.limit / self.window_s)
        bucket.updated = now
        return bucket

    def _forget(self, now: float, adding: bool) -> None:
        """Drop the least recently seen buckets while they are full again, or while there are too many.

        Amortised O(1): each bucket is dropped once. A bucket last seen more than two windows ago is full (its
        debt is at most one window), and so is every bucket before it in the order, all older still. The
        subject being seen is last in the order (or not yet in it, when `adding`), so it stays.
        """
        buckets, rate = self.buckets, self.limit / self.window_s
        while len(buckets) > (0 if adding else 1):
            subject, oldest = next(iter(buckets.items()))
            crowded = 0 < self.max_subjects < len(buckets) + adding
            if not crowded and oldest.tokens + (now - oldest.updated) * rate < self.limit:
                return
            del buckets[subject]

    def take(self, subject: str, now: float) -> float:
        """Spend one token: 0.0 when allowed, else the seconds until one is available."""
        rate = self.limit / self.window_s
        bucket = self._refilled(subject, now)
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / rate

    def remaining(self, subject: str, now: float) -> float:
        """Tokens left for `subject` as this edge knows them (asking tracks no new subject)."""
        if subject not in self.buckets:
            return float(self.limit)
        return self._refilled(subject, now).tokens

    def refund(self, subject: str, now: float) -> None:
        """Give back a token `take` spent on something that did not happen after all."""
        bucket = self._refilled(subject, now)
        bucket.tokens = min(float(self.limit), bucket.tokens + 1.0)

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
