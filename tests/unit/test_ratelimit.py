"""Token buckets and the usage edges share (docs/api.md, Limits)."""

from __future__ import annotations

from ingest.ratelimit import RateLimiter, UsageLedger


def test_bucket_allows_the_limit_then_says_when_to_retry() -> None:
    limiter = RateLimiter(limit=60, window_s=60.0)
    assert all(limiter.take("a", 0.0) == 0.0 for _ in range(60))
    assert limiter.take("a", 0.0) == 1.0
    assert limiter.take("a", 1.0) == 0.0
    assert limiter.take("b", 1.0) == 0.0


def test_another_edges_usage_is_spent_from_the_same_bucket() -> None:
    limiter = RateLimiter(limit=60, window_s=60.0)
    limiter.debit("a", 59, 0.0)
    assert limiter.take("a", 0.0) == 0.0
    assert limiter.take("a", 0.0) == 1.0


def test_debt_is_bounded_by_one_window() -> None:
    limiter = RateLimiter(limit=60, window_s=60.0)
    limiter.debit("a", 10_000, 0.0)
    assert limiter.take("a", 0.0) == 61.0


def test_ledger_drains_what_was_admitted_since_the_last_report() -> None:
    ledger = UsageLedger()
    for subject in ("a", "a", "b"):
        ledger.add(subject)
    assert ledger.drain() == {"a": 2, "b": 1}
    assert ledger.drain() == {}


def test_remaining_is_what_this_edge_knows_is_left_refilling_with_time() -> None:
    limiter = RateLimiter(limit=60, window_s=60.0)
    assert limiter.remaining("a", 0.0) == 60.0
    limiter.take("a", 0.0)
    limiter.debit("a", 50, 0.0)
    assert limiter.remaining("a", 0.0) == 9.0
    assert limiter.remaining("a", 3.0) == 12.0
