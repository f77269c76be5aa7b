"""The score of a call start (docs/rules.md, Scoring) and a call's settled spam score: pure functions."""

from __future__ import annotations

from collections.abc import Collection, Iterable

import msgspec

from domain.facts import LastCall, Prior, PublicBlock, ScoreResult, Thresholds
from domain.rules import DAY_MS, SECOND_MS, ScoringRules


class Last(msgspec.Struct, frozen=True, gc=False):
    score: int
    at: int


class History(msgspec.Struct, frozen=True, gc=False):
    """What is known of a caller before this call: the network's, and the scoring account's imports."""

    calls: int = 0
    good: int = 0
    # Calls that settled at `prior_bad_spam` or more, and those above `prior_good_none_above`.
    bad: int = 0
    above: int = 0
    points: int = 0
    last_settled: Last | None = None
    last_start: Last | None = None
    # Calls its owner (or its platform) labelled spam (`domain.labels`): each trips `prior_bad`.
    labelled_spam: int = 0

    def plus(self, other: History) -> History:
        """Both histories as one: counts added, the latest of each kind of score kept."""
        return History(
            calls=self.calls + other.calls,
            good=self.good + other.good,
            bad=self.bad + other.bad,
            above=self.above + other.above,
            points=self.points + other.points,
            last_settled=_latest(self.last_settled, other.last_settled),
            last_start=_latest(self.last_start, other.last_start),
            labelled_spam=self.labelled_spam + other.labelled_spam,
        )

    @property
    def last(self) -> Last | None:
        candidates = [c for c in (self.last_settled, self.last_start) if c is not None]
        return max(candidates, key=lambda c: c.at) if candidates else None


class CallerView(msgspec.Struct, frozen=True, gc=False):
    """A caller as one account's start sees it (docs/rules.md, Network evidence).

    `history` is everything known, every account's calls and the account's imports: the answer's
    `prior`. `evidence` is what the rules may read: the account's own history, and another account's
    only where at least two other accounts agree (good calls, calls above the good bound), so one tenant
    cannot move another tenant's score. An account whose agreeing history came only from path tokens
    counts for `network_token_weight` of one (`agreed`). `network_bad` is that agreement on a bad last
    call, and `first_seen` the first time the account itself, or a second other account, saw the caller.
    """

    history: History = History()
    evidence: History = History()
    network_bad: bool = False
    bad_accounts: int = 0
    good_accounts: int = 0
    # Of `bad_accounts` and `good_accounts`, those whose agreement rests on path tokens' events alone.
    bad_token_accounts: int = 0
    good_token_accounts: int = 0
    reached: int = 0
    first_seen: int | None = None


def agreed(accounts: int, token_accounts: int, rules: ScoringRules) -> bool:
    """Whether other accounts agree enough to move a score: `accounts` of them, `token_accounts` of which
    agree only on what path tokens posted, each of those counting for `network_token_weight` of one."""
    weight = accounts - token_accounts + token_accounts * rules.network_token_weight
    # Rounded: a weight such as 0.1, ten times over, must make one account, not 0.9999999999999999.
    return round(weight, 9) >= rules.network_agree_accounts


def _latest(a: Last | None, b: Last | None) -> Last | None:
    if a is None or b is None:
        return a or b
    return a if a.at >= b.at else b


class Signals(msgspec.Struct, frozen=True, gc=False):
    """Everything the score reads about one start."""

    at: int
    trusted: bool = False
    block: PublicBlock | None = None
    attestation: str | None = None
    caller_valid: bool = True
    self_call: bool = False
    neighbor: bool = False
    premium: bool = False
    forwarded: bool = False
    caller_calls_10m: int = 1
    patterns: frozenset[str] = frozenset()
    caller: CallerView = CallerView()
    checks: dict[str, int] = {}
    # An outbound start (docs/rules.md, Outbound guard): `caller` is the dialled number, and where it goes
    # is scored too.
    outbound: bool = False
    destination_not_allowed: bool = False
    transfer_not_allowed: bool = False
    destination_numbers_10m: int = 0
    one_rings_24h: int = 0
    outbound_paused: bool = False


ATTESTATION_REASONS = {
    "failed": "attestation_failed",
    "C": "attestation_c",
    "B": "attestation_b",
    "none": "attestation_none",
}


def thresholds(rules: ScoringRules) -> Thresholds:
    return Thresholds(review=rules.review, reject=rules.reject)


def action_for(score: float, rules: ScoringRules) -> str:
    if score >= rules.reject:
        return "reject"
    if score >= rules.review:
        return "review"
    return "allow"


def risk_signals(s: Signals, rules: ScoringRules) -> list[str]:
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
        reasons.append("premium_rate_destination" if s.outbound else "premium_rate_caller")
    if s.caller_calls_10m > rules.rate_max_calls:
        reasons.append("rate_exceeded")
    reasons.extend(sorted(s.patterns))
    if s.caller.network_bad or prior_bad(s.caller.evidence, rules):
        reasons.append("prior_bad")
    if s.forwarded:
        reasons.append("forwarded")
    if s.outbound:
        reasons.extend(outbound_signals(s, rules))
    return reasons


def outbound_signals(s: Signals, rules: ScoringRules) -> list[str]:
    """The reasons only an outbound start has, beside `premium_rate_destination`."""
    reasons = []
    if s.destination_not_allowed:
        reasons.append("destination_not_allowed")
    if s.transfer_not_allowed:
        reasons.append("transfer_not_allowed")
    if destination_burst(s.destination_numbers_10m, rules):
        reasons.append("destination_burst")
    if s.one_rings_24h > 0:
        reasons.append("callback_to_one_ring")
    if s.outbound_paused:
        reasons.append("outbound_paused")
    return reasons


def destination_not_allowed(country: str, allowed: Collection[str]) -> bool:
    """The dialled number's country is not one the account's agents may dial."""
    return country not in allowed


def transfer_not_allowed(number: str, transfer: bool, allowed: Iterable[str]) -> bool:
    """A transfer to a number no entry of the list matches: an entry is an exact number or a prefix of one,
    and an exact number is its own longest prefix, so one test serves both; an empty list allows none."""
    return transfer and not any(number.startswith(entry) for entry in allowed)


def destination_prefix(number: str, rules: ScoringRules) -> str:
    """The E.164 prefix a traffic-pumping run shares: `+` and the first digits, country code included."""
    return number[: rules.burst_digits + 1]


def destination_numbers(
    calls: Iterable[tuple[int, str]], number: str, at: int, rules: ScoringRules
) -> tuple[str, list[str]]:
    """The prefix of `number`, and the distinct numbers sharing it among the account's outbound `calls`
    (time, dialled number) within the burst window up to `at`, this start's number included."""
    prefix = destination_prefix(number, rules)
    since = at - rules.burst_window_ms
    numbers = {n for t, n in calls if since < t <= at and destination_prefix(n, rules) == prefix}
    return prefix, sorted(numbers | {number})


def destination_burst(numbers: int, rules: ScoringRules) -> bool:
    """This start makes `burst_numbers` or more distinct numbers under one prefix within the window."""
    return numbers >= rules.burst_numbers


def one_ring(direction: str, answered: bool, started_at: int, ended_at: int, rules: ScoringRules) -> bool:
    """An inbound call that ended unanswered within `one_ring_s` of its start: the bait of a callback scam."""
    return direction == "inbound" and not answered and ended_at - started_at <= rules.one_ring_s * SECOND_MS


def one_rings(ends: Iterable[int], at: int, rules: ScoringRules) -> int:
    """How many of a number's one-ring calls to the account ended within the window before `at`."""
    return sum(1 for t in ends if at - rules.one_ring_window_ms < t <= at)


def prior_bad(history: History, rules: ScoringRules) -> bool:
    settled = history.last_settled is not None and history.last_settled.score >= rules.prior_bad_spam
    started = history.last_start is not None and history.last_start.score >= round(rules.reject * 100)
    return settled or started or history.labelled_spam > 0


def prior_good(history: History, rules: ScoringRules) -> bool:
    return history.good >= rules.prior_good_calls and history.above == 0


def prior_of(history: History, at: int) -> Prior:
    last = history.last
    return Prior(
        points=history.points,
        calls=history.calls,
        good=history.good,
        last=None if last is None else LastCall(score=last.score, days=max(0, (at - last.at) // DAY_MS)),
    )


def score_start(call_id: str, s: Signals, rules: ScoringRules) -> ScoreResult:
    """The score result of docs/api.md (without `duplicate` and `capped`)."""

    def result(score: float, reasons: list[str]) -> ScoreResult:
        return ScoreResult(
            call_id=call_id,
            score=score,
            action=action_for(score, rules),
            thresholds=thresholds(rules),
            reasons=tuple(reasons),
            block=s.block,
            checks=s.checks,
            prior=prior_of(s.caller.history, s.at),
        )

    paused = s.outbound_paused and "outbound_paused" not in rules.off and rules.weights["outbound_paused"] > 0
    # The kill switch stops every outbound start of the account, a trusted number's too.
    if s.trusted and not paused:
        return result(0.0, ["trusted"])
    if s.block is not None:
        return result(1.0, ["blocked"])
    present = [r for r in risk_signals(s, rules) if r not in rules.off and rules.weights[r] > 0]
    weighted = sorted(((rules.weights[r], r) for r in present), key=lambda wr: (-wr[0], wr[1]))
    keep = 1.0
    for weight, _ in weighted:
        keep *= 1.0 - weight
    score = 1.0 - keep
    reasons = [r for _, r in weighted]
    # A certainty (a destination or transfer the account forbids, a paused outbound) is not relieved.
    certain = bool(weighted) and weighted[0][0] >= 1.0
    if score > 0 and not certain and "prior_good" not in rules.off and prior_good(s.caller.evidence, rules):
        score *= rules.prior_good_relief
        reasons.append("prior_good")
    return result(round(score, 4), reasons)


class Ending(msgspec.Struct, frozen=True, gc=False):
    """What the end of a call adds to its spam score."""

    duration_s: int = 0
    answered: bool = False
    machine_inbound: bool = False


def settle_spam_score(
    start_score: float | None,
    live_score: float,
    flags: tuple[str, ...],
    two_sided: bool,
    ending: Ending | None,
    rules: ScoringRules,
) -> int | None:
    """The 0-100 spam score: recomputed on every turn, settled at the end; None with nothing to score."""
    if start_score is None and not flags and live_score == 0:
        return None
    value = max(start_score or 0.0, live_score) * 100
    if ending is not None:
        if ending.answered and ending.duration_s < rules.short_call_s:
            value += rules.short_call_points
        if ending.machine_inbound:
            value += rules.machine_points
    value += rules.flag_spam_points * len(flags)
    if two_sided and not flags:
        value *= rules.two_sided_factor
    return max(0, min(100, round(value)))
