"""The scoring policy: weights and rule constants, from one TOML file."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from callscreen.settings import Settings


@dataclass(frozen=True)
class Policy:
    weights: dict[str, float]
    prior_good_relief: float
    rate_window_ms: int
    rate_max_calls: int
    prior_bad_spam: int
    prior_good_calls: int
    prior_good_below: int
    neighbor_digits: int
    review: float
    reject: float


def load_policy(settings: Settings) -> Policy:
    if settings.policy_file:
        data: dict[str, Any] = tomllib.loads(Path(settings.policy_file).read_text())
    else:
        data = tomllib.loads(files(__package__).joinpath("policy.toml").read_text())
    rules = data["rules"]
    return Policy(
        weights={k: float(v) for k, v in data["weights"].items()},
        prior_good_relief=float(data["relief"]["prior_good"]),
        rate_window_ms=int(rules["rate_window_min"]) * 60_000,
        rate_max_calls=int(rules["rate_max_calls"]),
        prior_bad_spam=int(rules["prior_bad_spam"]),
        prior_good_calls=int(rules["prior_good_calls"]),
        prior_good_below=int(rules["prior_good_below"]),
        neighbor_digits=int(rules["neighbor_digits"]),
        review=settings.review_threshold,
        reject=settings.reject_threshold,
    )
