"""An account's scoring policy: its thresholds, per-reason weights and switches (docs/rules.md, Policy).

The deployment's `ScoringRules` hold the defaults; a policy overrides some of them for one account.
The edge stamps the account's policy on each `call.started` it appends, so a refold or a rebuild
scores every start with the policy it was answered with, and a shadow run swaps in a candidate.
"""

from __future__ import annotations

import dataclasses
import math
from types import MappingProxyType
from typing import Any

import msgspec

from domain.rules import ScoringRules

# The accounts record that sets an account's policy; its `policy` is `policy_record`'s shape.
POLICY_SET = "policy.set"

# Reasons a policy may switch off besides the weighted ones: `prior_good` is a relief, not a weight.
# `blocked` and `trusted` are the owner's own decisions about one caller, never a policy's.
RELIEF_REASONS = ("prior_good",)


class PolicyError(Exception):
    """A policy the contract refuses: `invalid_field`, naming the field."""

    def __init__(self, field: str) -> None:
        super().__init__(field)
        self.field = field


class Policy(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """What one account changes of the scoring defaults; absent parts keep the deployment's."""

    review: float | None = None
    reject: float | None = None
    weights: dict[str, float] = {}
    off: list[str] = []

    @property
    def empty(self) -> bool:
        return self.review is None and self.reject is None and not self.weights and not self.off


def parse_policy(body: Any, defaults: ScoringRules, prefix: str = "policy") -> Policy:
    """The policy in a request body `{"thresholds": {"review", "reject"}, "weights": {...}, "off": [...]}`."""
    if not isinstance(body, dict):
        raise PolicyError(prefix)
    for name in body:
        if name not in ("thresholds", "weights", "off"):
            raise PolicyError(f"{prefix}.{name}")
    thresholds = _or_empty(body.get("thresholds"), {})
    if not isinstance(thresholds, dict) or any(name not in ("review", "reject") for name in thresholds):
        raise PolicyError(f"{prefix}.thresholds")
    review = _ratio(thresholds.get("review"), f"{prefix}.thresholds.review")
    reject = _ratio(thresholds.get("reject"), f"{prefix}.thresholds.reject")
    if (review if review is not None else defaults.review) > (reject if reject is not None else defaults.reject):
        raise PolicyError(f"{prefix}.thresholds")
    weights_in = _or_empty(body.get("weights"), {})
    if not isinstance(weights_in, dict):
        raise PolicyError(f"{prefix}.weights")
    weights: dict[str, float] = {}
    for reason, weight in sorted(weights_in.items()):
        if reason not in defaults.weights:
            raise PolicyError(f"{prefix}.weights.{reason}")
        value = _ratio(weight, f"{prefix}.weights.{reason}")
        if value is None:
            raise PolicyError(f"{prefix}.weights.{reason}")
        weights[reason] = value
    off_in = _or_empty(body.get("off"), [])
    if not isinstance(off_in, list):
        raise PolicyError(f"{prefix}.off")
    switchable = set(defaults.weights) | set(RELIEF_REASONS)
    if any(not isinstance(reason, str) or reason not in switchable for reason in off_in):
        raise PolicyError(f"{prefix}.off")
    return Policy(review=review, reject=reject, weights=weights, off=sorted(set(off_in)))


def _or_empty(value: Any, empty: Any) -> Any:
    """A part given as null counts as absent; any other value is checked as given."""
    return empty if value is None else value


def _ratio(value: Any, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise PolicyError(field)
    if not 0 <= value <= 1:
        raise PolicyError(field)
    return float(value)


def policy_record(policy: Policy) -> dict[str, Any]:
    """What a policy changes, in `parse_policy`'s shape: the form it takes on the accounts topic."""
    thresholds = {
        name: value for name, value in (("review", policy.review), ("reject", policy.reject)) if value is not None
    }
    return {"thresholds": thresholds, "weights": dict(policy.weights), "off": list(policy.off)}


def record_policy(record: dict[str, Any]) -> Policy:
    """The policy `policy_record` wrote, checked when it was appended."""
    thresholds = record.get("thresholds") or {}
    return Policy(
        review=thresholds.get("review"),
        reject=thresholds.get("reject"),
        weights=dict(record.get("weights") or {}),
        off=list(record.get("off") or []),
    )


def policy_body(policy: Policy | None, defaults: ScoringRules) -> dict[str, Any]:
    """The policy in effect, in the shape `parse_policy` reads: every threshold and weight, and the switches."""
    rules = scoring_for(defaults, policy)
    return {
        "thresholds": {"review": rules.review, "reject": rules.reject},
        "weights": dict(sorted(rules.weights.items())),
        "off": sorted(rules.off),
    }


# Keyed by the defaults' id, holding the defaults too so that id cannot be reused while cached.
_CACHE: dict[tuple[int, bytes], tuple[ScoringRules, ScoringRules]] = {}
_CACHE_SIZE = 1024


def scoring_for(defaults: ScoringRules, policy: Policy | None) -> ScoringRules:
    """The scoring rules one account's starts are scored by: the defaults with its policy laid over them."""
    if policy is None or policy.empty:
        return defaults
    # Rebuilt for every start otherwise; policies are few, so the cache stays small.
    key = (id(defaults), msgspec.json.encode(policy))
    cached = _CACHE.get(key)
    if cached is not None and cached[0] is defaults:
        return cached[1]
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.clear()
    rules = dataclasses.replace(
        defaults,
        review=defaults.review if policy.review is None else policy.review,
        reject=defaults.reject if policy.reject is None else policy.reject,
        weights=MappingProxyType({**defaults.weights, **policy.weights}),
        off=frozenset(policy.off),
    )
    _CACHE[key] = (defaults, rules)
    return rules
