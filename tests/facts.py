"""Facts as the fold appends them, for tests of the code that reads them (the detectors, the feature view)."""

from __future__ import annotations

from typing import Any

from domain.facts import CallDecided, Prior, ScoreResult, Thresholds

ACCOUNT = "acct_x"
NUMBER = "+14155552671"
# An allowed start with nothing against it: what most of a number's traffic is.
ALLOWED = ScoreResult(
    call_id="c",
    score=0.0,
    action="allow",
    thresholds=Thresholds(0.5, 0.8),
    reasons=(),
    block=None,
    checks={},
    prior=Prior(),
)


def call_decided(n: int, at: int, caller: str, **fields: Any) -> CallDecided:
    """The `n`th start on `ACCOUNT`'s `NUMBER` at `at`, allowed; `fields` names any other field of the fact."""
    values: dict[str, Any] = {
        "id": f"f{n}",
        "account_id": ACCOUNT,
        "number": NUMBER,
        "at": at,
        "call_id": f"c{n}",
        "caller": caller,
        "caller_country": "US",
        "caller_first_at": None,
        "geo": None,
        "cost": None,
        "direction": "inbound",
        "provider_call_id": None,
        "quiet": False,
        "number_created": False,
        "received_at": at,
        "answer": ALLOWED,
    }
    return CallDecided(**{**values, **fields})
