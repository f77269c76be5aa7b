"""The synchronous score of a call start (decisions.md section 7): a pure function of facts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from processors.policy import Policy

DAY_MS = 86_400_000


@dataclass(frozen=True)
class Last:
    score: int
    at: int


@dataclass(frozen=True)
class History:
    """What the network knows of a caller before this call."""

    calls: int = 0
    good: int = 0
    bad: int = 0
    points: int = 0
    last_settled: Last | None = None
    last_start: Last | None = None

    @property
    def last(self) -> Last | None:
        candidates = [c for c in (self.last_settled, self.last_start) if c is not None]
        return max(candidates, key=lambda c: c.at) if candidates else None


@dataclass(frozen=True)
class Signals:
    """Everything the score reads about one start."""

    at: int
    trusted: bool = False
    block: dict[str, Any] | None = None
    attestation: str | None = None
    caller_valid: bool = True
    self_call: bool = False
    neighbor: bool = False
    premium: bool = False
    forwarded: bool = False
    caller_calls_10m: int = 1
    patterns: frozenset[str] = frozenset()
    history: History = field(default_factory=History)
    checks: dict[str, int] = field(default_factory=dict)


ATTESTATION_REASONS = {
    "failed": "attestation_failed",
    "C": "attestation_c",
    "B": "attestation_b",
    "none": "attestation_none",
}


def action_for(score: float, policy: Policy) -> str:
    if score >= policy.reject:
        return "reject"
    if score >= policy.review:
        return "review"
    return "allow"


def risk_signals(s: Signals, policy: Policy) -> list[str]:
    """The reason codes whose signal is present, before weighting."""
    reasons = []
    if s.attestation in ATTESTATION_REASONS:
        reasons.append(ATTESTATION_REASONS[s.attestation])
    if not s.caller_valid:
        reasons.append("invalid_number")
    if s.self_call:
        reasons.append("self_call")
    elif s.neighbor:
        reasons.append("neighbor_spoof")
    if s.premium:
        reasons.append("premium_rate_caller")
    if s.caller_calls_10m > policy.rate_max_calls:
        reasons.append("rate_exceeded")
    reasons.extend(sorted(s.patterns))
    if prior_bad(s.history, policy):
        reasons.append("prior_bad")
    if s.forwarded:
        reasons.append("forwarded")
    return reasons


def prior_bad(history: History, policy: Policy) -> bool:
    settled = history.last_settled is not None and history.last_settled.score >= policy.prior_bad_spam
    started = history.last_start is not None and history.last_start.score >= round(policy.reject * 100)
    return settled or started


def prior_good(history: History, policy: Policy) -> bool:
    return history.good >= policy.prior_good_calls and history.bad == 0


def prior_body(history: History, at: int) -> dict[str, Any]:
    last = history.last
    return {
        "points": history.points,
        "calls": history.calls,
        "good": history.good,
        "last": None if last is None else {"score": last.score, "days": max(0, (at - last.at) // DAY_MS)},
    }


def score_start(s: Signals, policy: Policy) -> dict[str, Any]:
    """The score result of interface section 2 (without call_id, duplicate and capped)."""
    thresholds = {"review": policy.review, "reject": policy.reject}
    common = {"thresholds": thresholds, "block": s.block, "checks": s.checks, "prior": prior_body(s.history, s.at)}
    if s.trusted:
        return {"score": 0.0, "action": "allow", "reasons": ["trusted"], **common}
    if s.block is not None:
        return {"score": 1.0, "action": "reject", "reasons": ["blocked"], **common}
    present = risk_signals(s, policy)
    weighted = sorted(((policy.weights[r], r) for r in present), key=lambda wr: (-wr[0], wr[1]))
    keep = 1.0
    for weight, _ in weighted:
        keep *= 1.0 - weight
    score = 1.0 - keep
    reasons = [r for _, r in weighted]
    if score > 0 and prior_good(s.history, policy):
        score *= policy.prior_good_relief
        reasons.append("prior_good")
    score = round(score, 4)
    return {"score": score, "action": action_for(score, policy), "reasons": reasons, **common}


def settle_spam_score(
    start_score: float | None,
    live_score: float,
    duration_s: int,
    answered: bool,
    machine_inbound: bool,
    flags: list[str],
    two_sided: bool,
) -> int | None:
    """The settled 0-100 spam score at call end; None when there is nothing to score."""
    if start_score is None and not flags and live_score == 0:
        return None
    value = max(start_score or 0.0, live_score) * 100
    if answered and duration_s < 10:
        value += 15
    if machine_inbound:
        value += 20
    value += 10 * len(flags)
    if two_sided and not flags:
        value *= 0.7
    return max(0, min(100, round(value)))
