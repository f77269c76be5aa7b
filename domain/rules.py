"""Every rule the service applies, with its default, written once (docs/rules.md lists them all).

One frozen object per concern. `infra.settings` builds the deployment's rules from these defaults
and overrides them from the environment, the settings file and the policy file; nothing else holds
a default of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

SECOND_MS = 1_000
MIN_MS = 60_000
HOUR_MS = 3_600_000
DAY_MS = 86_400_000


def _frozen(values: Mapping[str, float]) -> Any:
    """A read-only table default (a rules object is frozen, its tables too)."""
    return field(default_factory=lambda: MappingProxyType(dict(values)))


@dataclass(frozen=True)
class ScoringRules:
    """How a start is scored (docs/rules.md, Scoring), and how a call's spam score settles."""

    review: float = 0.5
    reject: float = 0.8
    weights: Mapping[str, float] = _frozen(
        {
            "attestation_failed": 0.55,
            "attestation_c": 0.35,
            "attestation_b": 0.25,
            "attestation_none": 0.10,
            "invalid_number": 0.45,
            "self_call": 0.60,
            "neighbor_spoof": 0.25,
            "premium_rate_caller": 0.30,
            "rate_exceeded": 0.70,
            "rotating_numbers": 0.75,
            "prefix_cluster": 0.40,
            "country_burst": 0.30,
            "geo_cluster": 0.35,
            "prior_bad": 0.50,
            "forwarded": 0.05,
            # Outbound starts only (docs/rules.md, Outbound guard); a weight of 1 is a certainty, never relieved.
            "destination_not_allowed": 1.0,
            "premium_rate_destination": 0.85,
            "transfer_not_allowed": 1.0,
            "destination_burst": 0.75,
            "callback_to_one_ring": 0.60,
            "outbound_paused": 1.0,
        }
    )
    # Reasons an account's policy switched off (`domain.policy`): they neither move the score nor show.
    off: frozenset[str] = frozenset()
    prior_good_relief: float = 0.5
    rate_window_min: int = 10
    rate_max_calls: int = 5
    prior_bad_spam: int = 70
    prior_good_calls: int = 3
    prior_good_below: int = 30
    # `prior_good` also needs no earlier call settled above this.
    prior_good_none_above: int = 70
    # Other accounts whose own history of a caller must agree before it moves a score (network evidence).
    network_agree_accounts: int = 2
    # What an account counts for in that agreement when its agreeing history came only from path tokens
    # (its ingest token, a gate token), never from an API key: a token lives in a URL that platforms,
    # carriers and their logs all hold, so two leaked tokens must not speak for the network.
    network_token_weight: float = 0.5
    neighbor_digits: int = 6
    # Traffic pumping: this many outbound calls of an account to distinct numbers sharing their first digits
    # (E.164, country code included) within the window.
    burst_numbers: int = 5
    burst_digits: int = 8
    burst_window_min: int = 10
    # A one-ring caller: an inbound call that ended unanswered this soon after its start, within the window.
    one_ring_s: int = 5
    one_ring_window_h: int = 24
    # Points charged to a caller (`prior.points`): per alert naming it, by severity, and per live flag.
    alert_points: Mapping[str, float] = _frozen({"info": 1, "threat": 3, "critical": 5})
    flag_points: int = 1
    # The settled spam score: what end-of-call evidence adds or takes away.
    short_call_s: int = 10
    short_call_points: int = 15
    machine_points: int = 20
    flag_spam_points: int = 10
    # A normal conversation (each side this many turns, no flag) lowers the settled score by this factor.
    two_sided_turns: int = 2
    two_sided_factor: float = 0.7

    @property
    def rate_window_ms(self) -> int:
        return self.rate_window_min * MIN_MS

    @property
    def burst_window_ms(self) -> int:
        return self.burst_window_min * MIN_MS

    @property
    def one_ring_window_ms(self) -> int:
        return self.one_ring_window_h * HOUR_MS


@dataclass(frozen=True)
class LiveRules:
    """The live monitor's flags (docs/rules.md, The live monitor)."""

    recording_s: float = 45.0
    recording_words: int = 120
    monologue_turns: int = 3
    monologue_s: float = 20.0
    monologue_words: int = 60
    barge_count: int = 6
    barge_window_s: float = 60.0
    rapid_count: int = 8
    rapid_window_s: float = 10.0
    repeat_count: int = 3
    silent_s: float = 60.0
    one_sided_words: int = 200
    one_sided_ratio: float = 0.10
    # How much each flag raises the live score (noisy-OR on top of the start's score).
    flag_weights: Mapping[str, float] = _frozen(
        {
            "recording_likely": 0.60,
            "monologue": 0.30,
            "barge_storm": 0.50,
            "rapid_fire": 0.60,
            "repeated_turns": 0.60,
            "silent_listener": 0.50,
            "one_sided": 0.30,
        }
    )


@dataclass(frozen=True)
class DetectorRules:
    """The detectors and their cooldowns (docs/rules.md, Detectors)."""

    rate_calls: int = 5
    rate_window_min: int = 10
    rotating_callers: int = 4
    rotating_window_min: int = 10
    rotating_digits: int = 2
    prefix_callers: int = 10
    prefix_digits: int = 8
    prefix_share: float = 0.5
    prefix_window_min: int = 30
    country_calls: int = 10
    country_window_min: int = 15
    country_quiet_days: int = 7
    geo_callers: int = 5
    geo_window_min: int = 30
    volume_ceiling: int = 120
    spike_factor: float = 3.0
    spike_min_calls: int = 20
    spike_floor: float = 5.0
    normal_factor: float = 1.5
    baseline_days: int = 7
    spend_ceiling: float = 25.0
    block_min: int = 60
    cooldown_min: int = 15
    long_call_min: int = 30
    degraded_bad: int = 3
    degraded_last: int = 10
    degraded_window_min: int = 5
    degraded_slow_ms: int = 3000


@dataclass(frozen=True)
class Plan:
    numbers: int
    daily_starts: int
    live_monitor: bool


@dataclass(frozen=True)
class PlanRules:
    """What each plan allows (docs/rules.md, Plans)."""

    watch_numbers: int = 3
    watch_daily_starts: int = 1000
    guard_numbers: int = 25
    guard_daily_starts: int = 25000

    def plan(self, name: str) -> Plan:
        if name == "guard":
            return Plan(self.guard_numbers, self.guard_daily_starts, live_monitor=True)
        return Plan(self.watch_numbers, self.watch_daily_starts, live_monitor=False)


@dataclass(frozen=True)
class LimitRules:
    """Request limits (docs/api.md, Errors and Limits)."""

    reads_per_minute: int = 600
    # Questions to the workers per minute per account, across all its keys and dashboard sessions: keys
    # are cheap to make, so the per-key limit alone lets one account fill every worker's read budget.
    account_reads_per_minute: int = 1200
    # Keys an account may hold (revoked ones excepted).
    max_keys_per_account: int = 20
    events_per_minute: int = 1200
    max_call_turns: int = 3000
    max_body_bytes: int = 65536
    # Bytes of accepted event bodies one account may add to the log per UTC day (429 quota_exceeded past it).
    event_bytes_per_day: int = 268435456
    max_future_at_s: int = 300
    # A live (not `quiet`) start may be this old on receipt; older history comes in as `quiet` imports, up to
    # the days below. Later events of a call that exists are placed by their `at` whatever their age.
    max_live_start_age_days: int = 7
    max_quiet_age_days: int = 400
    # A call or alert leaves the hot tables this many days after its day, counted in its partition's
    # event time (`domain.horizon`); the log keeps it.
    hot_days: int = 400


@dataclass(frozen=True)
class Rules:
    scoring: ScoringRules = field(default_factory=ScoringRules)
    live: LiveRules = field(default_factory=LiveRules)
    detectors: DetectorRules = field(default_factory=DetectorRules)
    plans: PlanRules = field(default_factory=PlanRules)
    limits: LimitRules = field(default_factory=LimitRules)
