"""Token buckets for the request limits of decisions.md section 5."""

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

    def take(self, subject: str, now: float) -> float:
        """Spend one token: 0.0 when allowed, else the seconds until one is available."""
        rate = self.limit / self.window_s
        bucket = self.buckets.get(subject)
        if bucket is None:
            bucket = self.buckets[subject] = Bucket(tokens=float(self.limit), updated=now)
        bucket.tokens = min(float(self.limit), bucket.tokens + (now - bucket.updated) * rate)
        bucket.updated = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / rate


def retry_after(wait_s: float) -> str:
    return str(max(1, math.ceil(wait_s)))
