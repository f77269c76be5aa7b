"""Detectors (docs/rules.md, Detectors): a fold over one protected number's window of recent calls.

`observe` takes the number's window and one fact about it (a decision, a settlement, a tick of the
sweep) and returns the new window, the alerts to raise and the facts they place (blocks, patterns,
points). Windows run on event time; cooldowns, ids and blocks come out the same when replayed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import msgspec

from domain.alerts import Alert, callers_named, make_alert, with_prior
from domain.due import Due
from domain.facts import (
    AnyFact,
    BlockPlaced,
    CallDecided,
    CallSettled,
    CostRaised,
    Fact,
    ForwardDone,
    NumberTick,
    PatternActive,
    PointsCharged,
)
from domain.gate import GATE_FAIL
from domain.rules import DAY_MS, HOUR_MS, MIN_MS, DetectorRules, ScoringRules

SEEN_KEEP = 500
# Every rule's threshold is far below this; it bounds the window of a number under a flood.
CALLS_KEEP = 400
# Cooldowns kept per number, the latest first. They are bounded by count, not by time: facts arrive
# with their own (possibly backdated) times, and a tick at the end of an hour must not end a cooldown
# that a backdated fact still falls in.
COOLDOWN_KEEP = 256
# Far more than the facts of one number folded between a worker's commits.
ECHO_KEEP = 64


class WindowCall(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """One call to the number, as the detectors need it."""

    at: int
    caller: str
    country: str
    caller_first_at: int | None
    zip: str | None
    city: str | None
    region: str | None
    call_id: str


class CountrySeen(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """A country's calls inside the burst window, and the latest one before them."""

    recent: tuple[int, ...]
    before: int | None


class Spike(msgspec.Struct, frozen=True, array_like=True, gc=False):
    since: int
    hour: int
    peak: int
    expected: float


class SpendHour(msgspec.Struct, frozen=True, array_like=True, gc=False):
    spend: float
    calls: int


class Echo(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """What one fact raised and placed, kept (a row of its own, `keys.echo`) so the fact folded again
    after a crash appends the same again."""

    fact_id: str
    alerts: tuple[Alert, ...]
    facts: tuple[AnyFact, ...]


class Forward(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """One gate forward to a platform host: when it finished, and whether it was bad (failed or slow)."""

    at: int
    id: str
    bad: bool


class NumberWindow(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    calls: tuple[WindowCall, ...] = ()
    countries: dict[str, CountrySeen] = msgspec.field(default_factory=dict)
    hours: dict[int, int] = msgspec.field(default_factory=dict)
    spend: dict[int, SpendHour] = msgspec.field(default_factory=dict)
    cooldown: dict[str, int] = msgspec.field(default_factory=dict)
    spike: Spike | None = None
    # The latest gate forwards per platform host, oldest first.
    forwards: dict[str, tuple[Forward, ...]] = msgspec.field(default_factory=dict)
    seen: tuple[str, ...] = ()
    # Ids of the latest facts that raised or placed something, whose echoes are kept.
    echoes: tuple[str, ...] = ()
    # How late (receipt time minus `at`) the number's latest call was reported: its sweep waits as long
    # (`tick_after`).
    reported_late_ms: int = 0


@dataclass(frozen=True)
class PatternSpec:
    kind: str
    match: str
    until: int
    width: int | None = None


@dataclass
class Detection:
    """One alert to raise, with the blocks and pattern it places."""

    type: str
    subject: str
    at: int
    data: dict[str, Any]
    blocks: list[str] = field(default_factory=list)
    pattern: PatternSpec | None = None
    # When the same (type, subject) fired within the cooldown, this detection raises no alert;
    # its blocks and pattern belong to the alert raised at `window_start`.
    raised: bool = True
    window_start: int = 0


class Observed(msgspec.Struct, frozen=True, gc=False):
    window: NumberWindow
    alerts: list[Alert]
    facts: list[Fact]
    # The echo to keep for this fact, and the facts whose echoes may now be dropped.
    echo: Echo | None = None
    forgotten: list[str] = []
    # When the sweep must tick the number again (`sweep_due`).
    due: Due | None = None


class _Working:
    """A mutable copy of a window while one fact is folded."""

    def __init__(self, window: NumberWindow) -> None:
        self.calls = list(window.calls)
        self.countries = dict(window.countries)
        self.hours = dict(window.hours)
        self.spend = dict(window.spend)
        self.cooldown = dict(window.cooldown)
        self.spike = window.spike
        self.forwards = dict(window.forwards)
        self.seen = list(window.seen)
        self.echoes = list(window.echoes)
        self.reported_late_ms = window.reported_late_ms

    def freeze(self) -> NumberWindow:
        return NumberWindow(
            calls=tuple(self.calls),
            countries=self.countries,
            hours=self.hours,
            spend=self.spend,
            cooldown=self.cooldown,
            spike=self.spike,
            forwards=self.forwards,
            seen=tuple(self.seen),
            echoes=tuple(self.echoes),
            reported_late_ms=self.reported_late_ms,
        )


def observe(
    window: NumberWindow,
    fact: Fact,
    rules: DetectorRules,
    scoring: ScoringRules,
    echo_of: Callable[[str], Echo | None] = lambda fact_id: None,
) -> Observed:
    """Fold one fact into the number's window: the new window, what it raises and places, and its due time."""
    observed = _observe(window, fact, rules, scoring, echo_of)
    due = sweep_due(observed.window, fact.at)
    if due is None:
        return observed
    return msgspec.structs.replace(observed, due=Due(due, tick_after(observed.window, due)))


def _observe(
    window: NumberWindow,
    fact: Fact,
    rules: DetectorRules,
    scoring: ScoringRules,
    echo_of: Callable[[str], Echo | None],
) -> Observed:
    if fact.id in window.seen:
        # Folded before: a crash may have lost what it raised on the way to the log, so raise it again
        # (the same ids, which every consumer counts once).
        echo = echo_of(fact.id) if fact.id in window.echoes else None
        return Observed(window, list(echo.alerts), list(echo.facts)) if echo else Observed(window, [], [])
    w = _Working(window)
    w.seen = [*w.seen, fact.id][-SEEN_KEEP:]
    raised_at = fact.at
    if isinstance(fact, CallDecided):
        found, quiet, raised_at = _decided(w, fact, rules, scoring), fact.quiet, fact.received_at
        if not quiet:
            # Imported history is not how the platform reports its calls.
            w.reported_late_ms = max(0, fact.received_at - fact.at)
    elif isinstance(fact, CallSettled):
        found, quiet, raised_at = _settled(w, fact, rules), fact.quiet, fact.received_at or fact.at
    elif isinstance(fact, CostRaised):
        found, quiet, raised_at = spend_exceeded(w, fact, fact.added, 0, rules), fact.quiet, fact.received_at
    elif isinstance(fact, NumberTick):
        found, quiet = volume_normal(w, fact.number, fact.at, rules), False
    elif isinstance(fact, ForwardDone):
        found, quiet = platform_degraded(w, fact, rules), False
    else:
        return Observed(window, [], [])
    if quiet:
        return Observed(w.freeze(), [], [])
    alerts: list[Alert] = []
    facts: list[Fact] = []
    for detection in found:
        _cool(w, detection, rules)
        alert = make_alert(
            fact.account_id, detection.type, detection.subject, detection.window_start, raised_at, detection.data
        )
        if detection.raised:
            alerts.append(alert)
            facts += charges(alert, fact.number, detection.at, scoring)
        facts += consequences(fact, detection, alert.id, rules)
    if len(w.cooldown) > COOLDOWN_KEEP:
        w.cooldown = dict(sorted(w.cooldown.items(), key=lambda kv: kv[1])[-COOLDOWN_KEEP:])
    if not alerts and not facts:
        return Observed(w.freeze(), alerts, facts)
    kept = [*w.echoes, fact.id]
    w.echoes = kept[-ECHO_KEEP:]
    echo = Echo(fact.id, tuple(alerts), tuple(cast(list[AnyFact], facts)))
    return Observed(w.freeze(), alerts, facts, echo=echo, forgotten=kept[:-ECHO_KEEP])


def _cool(w: _Working, found: Detection, rules: DetectorRules) -> None:
    """One alert per (type, subject) per cooldown; the window is the account's number's own."""
    key = f"{found.type}|{found.subject}"
    last = w.cooldown.get(key)
    if last is not None and found.at - last < rules.cooldown_min * MIN_MS:
        found.raised, found.window_start = False, last
        return
    w.cooldown[key] = found.window_start = found.at


def consequences(fact: Fact, detection: Detection, alert_id: str, rules: DetectorRules) -> list[Fact]:
    """The block and pattern facts a detection places, with ids that make re-applying them a no-op."""
    placed: list[Fact] = [
        BlockPlaced(
            id=f"{alert_id}:{caller}",
            account_id=fact.account_id,
            number=fact.number,
            at=detection.at,
            alert_id=alert_id,
            caller=caller,
            reason=detection.type,
            since=detection.window_start,
            until=detection.window_start + rules.block_min * MIN_MS,
        )
        for caller in detection.blocks
    ]
    if detection.pattern is not None:
        pattern = detection.pattern
        placed.append(
            PatternActive(
                id=f"{alert_id}:pattern:{pattern.until}",
                account_id=fact.account_id,
                number=fact.number,
                at=detection.at,
                alert_id=alert_id,
                pattern=pattern.kind,
                match=pattern.match,
                width=pattern.width,
                since=detection.at,
                until=pattern.until,
            )
        )
    return placed


def charges(alert: Alert, number: str, at: int, scoring: ScoringRules) -> list[Fact]:
    """Points an alert charges to each caller it names (`prior.points`)."""
    points = int(scoring.alert_points[alert.severity])
    return [
        PointsCharged(
            id=f"{alert.id}:points:{caller}",
            account_id=alert.account_id,
            number=number,
            at=at,
            caller=caller,
            points=points,
        )
        for caller in callers_named(alert)
    ]


def _decided(w: _Working, fact: CallDecided, rules: DetectorRules, scoring: ScoringRules) -> list[Detection]:
    geo = fact.geo or {}
    entry = WindowCall(
        at=fact.at,
        caller=fact.caller,
        country=fact.caller_country,
        caller_first_at=fact.caller_first_at,
        zip=geo.get("zip"),
        city=geo.get("city"),
        region=geo.get("region"),
        call_id=fact.call_id,
    )
    keep_from = fact.at - max(rules.prefix_window_min, rules.geo_window_min, 60) * MIN_MS
    recent = sorted([e for e in w.calls if e.at > keep_from] + [entry], key=lambda e: (e.at, e.call_id))
    w.calls = recent[-CALLS_KEEP:]
    hour = fact.at - fact.at % HOUR_MS
    w.hours[hour] = w.hours.get(hour, 0) + 1
    oldest_hour = fact.at - (rules.baseline_days + 1) * DAY_MS
    w.hours = {h: n for h, n in w.hours.items() if h > oldest_hour}
    found: list[Detection] = []
    found += rate_exceeded(w, fact, rules)
    found += rotating_numbers(w, fact, rules)
    found += prefix_cluster(w, fact, rules)
    found += country_burst(w, fact, rules)
    found += geo_cluster(w, fact, rules)
    found += volume_exceeded(w, fact, rules)
    found += volume_normal(w, fact.number, fact.at, rules)
    found += volume_spike(w, fact, rules)
    found += destination_burst(fact, scoring)
    _remember_country(w, entry, rules)
    return found


def destination_burst(fact: CallDecided, scoring: ScoringRules) -> list[Detection]:
    """`outbound.destination_burst`: the start made a traffic-pumping run (`domain.scoring.destination_burst`,
    counted over the account's outbound starts when it was decided); one alert per number and prefix."""
    burst = fact.burst
    if burst is None:
        return []
    data = {
        "number": fact.number,
        "call_id": fact.call_id,
        "prefix": burst.prefix,
        "numbers": list(burst.numbers),
        "count": len(burst.numbers),
        "window_min": scoring.burst_window_min,
    }
    return [Detection("outbound.destination_burst", f"{fact.number}|{burst.prefix}", fact.at, data)]


def _window(w: _Working, at: int, minutes: int) -> list[WindowCall]:
    return [e for e in w.calls if at - minutes * MIN_MS < e.at <= at]


def _fresh(entry: WindowCall, window_start: int) -> bool:
    return entry.caller_first_at is None or entry.caller_first_at >= window_start


def _with_direction(fact: CallDecided, data: dict[str, Any]) -> dict[str, Any]:
    if fact.direction == "outbound":
        data["direction"] = "outbound"
    return data


def rate_exceeded(w: _Working, fact: CallDecided, rules: DetectorRules) -> list[Detection]:
    count = sum(1 for e in _window(w, fact.at, rules.rate_window_min) if e.caller == fact.caller)
    if count <= rules.rate_calls:
        return []
    data = {
        "number": fact.number,
        "caller": fact.caller,
        "call_id": fact.call_id,
        "count": count,
        "window_min": rules.rate_window_min,
    }
    with_prior(_with_direction(fact, data), fact.answer.prior.last)
    subject = f"{fact.caller}|{fact.number}"
    return [Detection("caller.rate_exceeded", subject, fact.at, data, blocks=[fact.caller])]


def rotating_numbers(w: _Working, fact: CallDecided, rules: DetectorRules) -> list[Detection]:
    cut = rules.rotating_digits
    prefix = fact.caller[:-cut]
    run = sorted({e.caller for e in _window(w, fact.at, rules.rotating_window_min) if e.caller[:-cut] == prefix})
    if len(run) < rules.rotating_callers:
        return []
    pattern = prefix + "X" * cut
    data = {
        "number": fact.number,
        "call_id": fact.call_id,
        "pattern": pattern,
        "numbers": run,
        "count": len(run),
        "window_min": rules.rotating_window_min,
    }
    active = PatternSpec("rotating_numbers", prefix, fact.at + rules.rotating_window_min * MIN_MS, len(fact.caller))
    subject = f"{fact.number}|{pattern}"
    return [
        Detection("caller.rotating_numbers", subject, fact.at, _with_direction(fact, data), blocks=run, pattern=active)
    ]


def _digits(number: str, count: int) -> str:
    return number.lstrip("+")[:count]


def prefix_cluster(w: _Working, fact: CallDecided, rules: DetectorRules) -> list[Detection]:
    at, window = fact.at, rules.prefix_window_min
    prefix = _digits(fact.caller, rules.prefix_digits)
    calls = _window(w, at, window)
    start = at - window * MIN_MS
    fresh = {e.caller for e in calls if _digits(e.caller, rules.prefix_digits) == prefix and _fresh(e, start)}
    sharing = sum(1 for e in calls if _digits(e.caller, rules.prefix_digits) == prefix)
    if len(fresh) < rules.prefix_callers or sharing < rules.prefix_share * len(calls):
        return []
    data = {
        "number": fact.number,
        "call_id": fact.call_id,
        "pattern": f"+{prefix}*",
        "count": len(fresh),
        "window_min": window,
    }
    active = PatternSpec("prefix_cluster", prefix, at + window * MIN_MS)
    return [
        Detection("number.prefix_cluster", f"{fact.number}|{prefix}", at, _with_direction(fact, data), pattern=active)
    ]


def _remember_country(w: _Working, entry: WindowCall, rules: DetectorRules) -> None:
    at, country = entry.at, entry.country
    if not country:
        return
    seen = w.countries.get(country, CountrySeen((), None))
    horizon = at - rules.country_window_min * MIN_MS
    recent = sorted([*seen.recent, at])
    older = [t for t in recent if t <= horizon]
    before = max([*older, seen.before] if seen.before is not None else older, default=None)
    w.countries[country] = CountrySeen(tuple(t for t in recent if t > horizon), before)


def country_burst(w: _Working, fact: CallDecided, rules: DetectorRules) -> list[Detection]:
    country, at = fact.caller_country, fact.at
    if not country:
        return []
    window_start = at - rules.country_window_min * MIN_MS
    count = sum(1 for e in _window(w, at, rules.country_window_min) if e.country == country)
    seen = w.countries.get(country, CountrySeen((), None))
    before = max([t for t in seen.recent if t <= window_start] + ([seen.before] if seen.before else []), default=None)
    quiet_since = window_start - rules.country_quiet_days * DAY_MS
    if count < rules.country_calls or (before is not None and before >= quiet_since):
        return []
    data = {
        "number": fact.number,
        "call_id": fact.call_id,
        "country": country,
        "count": count,
        "window_min": rules.country_window_min,
    }
    active = PatternSpec("country_burst", country, at + rules.country_window_min * MIN_MS)
    subject = f"{fact.number}|{country}"
    return [Detection("number.country_burst", subject, at, _with_direction(fact, data), pattern=active)]


def geo_cluster(w: _Working, fact: CallDecided, rules: DetectorRules) -> list[Detection]:
    geo = fact.geo or {}
    zip_code = geo.get("zip")
    if not zip_code:
        return []
    at, window = fact.at, rules.geo_window_min
    start = at - window * MIN_MS
    same = [e for e in _window(w, at, window) if e.zip == zip_code and _fresh(e, start)]
    callers = sorted({e.caller for e in same})
    if len(callers) < rules.geo_callers:
        return []
    data = {
        "number": fact.number,
        "call_id": fact.call_id,
        "zip": zip_code,
        "city": geo.get("city"),
        "region": geo.get("region"),
        "numbers": callers,
        "count": len(callers),
        "window_min": window,
    }
    active = PatternSpec("geo_cluster", str(zip_code), at + window * MIN_MS)
    subject = f"{fact.number}|{zip_code}"
    return [Detection("number.geo_cluster", subject, at, _with_direction(fact, data), pattern=active)]


def volume_exceeded(w: _Working, fact: CallDecided, rules: DetectorRules) -> list[Detection]:
    count = len(_window(w, fact.at, 60))
    if count <= rules.volume_ceiling:
        return []
    data = {"number": fact.number, "call_id": fact.call_id, "count": count}
    return [Detection("number.volume_exceeded", fact.number, fact.at, _with_direction(fact, data))]


def baseline(hours: dict[int, int], hour: int, rules: DetectorRules) -> float:
    """Mean calls in the same hour of day over the last `baseline_days` days, never below the floor."""
    past = [hours.get(hour - d * DAY_MS, 0) for d in range(1, rules.baseline_days + 1)]
    return max(rules.spike_floor, sum(past) / len(past))


def volume_normal(w: _Working, number: str, at: int, rules: DetectorRules) -> list[Detection]:
    """After a spike, the first whole hour back under `normal_factor` × its baseline ends it."""
    spike = w.spike
    if spike is None:
        return []
    previous = at - at % HOUR_MS - HOUR_MS
    if previous < spike.hour or w.hours.get(previous, 0) >= rules.normal_factor * baseline(w.hours, previous, rules):
        return []
    w.spike = None
    data = {"number": number, "minutes": (at - spike.since) // MIN_MS, "peak": spike.peak, "expected": spike.expected}
    return [Detection("number.volume_normal", number, at, data)]


def volume_spike(w: _Working, fact: CallDecided, rules: DetectorRules) -> list[Detection]:
    at = fact.at
    hour = at - at % HOUR_MS
    calls = w.hours.get(hour, 0)
    if w.spike is not None:
        w.spike = msgspec.structs.replace(w.spike, peak=max(w.spike.peak, calls))
        return []
    expected = baseline(w.hours, hour, rules)
    if calls < rules.spike_factor * expected or calls < rules.spike_min_calls:
        return []
    callers = len({e.caller for e in w.calls if e.at >= hour})
    data = {"number": fact.number, "calls": calls, "callers": callers, "expected": round(expected, 2)}
    w.spike = Spike(since=at, hour=hour, peak=calls, expected=round(expected, 2))
    return [Detection("number.volume_spike", fact.number, at, data)]


def _settled(w: _Working, fact: CallSettled, rules: DetectorRules) -> list[Detection]:
    found = gate_failed(w, fact, rules)
    if not fact.cost:
        return found
    return found + spend_exceeded(w, fact, fact.cost, 1, rules)


def gate_failed(w: _Working, fact: CallSettled, rules: DetectorRules) -> list[Detection]:
    """A caller who pressed the wrong key at the gate: `caller.rate_exceeded` with `gate: "failed"`, and a
    block, as for too many calls (one subject, so one cooldown)."""
    if fact.reason != GATE_FAIL:
        return []
    count = sum(1 for e in _window(w, fact.at, rules.rate_window_min) if e.caller == fact.caller)
    data = {
        "number": fact.number,
        "caller": fact.caller,
        "call_id": fact.call_id,
        "count": count,
        "window_min": rules.rate_window_min,
        "gate": "failed",
    }
    with_prior(data, fact.prior)
    subject = f"{fact.caller}|{fact.number}"
    return [Detection("caller.rate_exceeded", subject, fact.at, data, blocks=[fact.caller])]


def spend_exceeded(
    w: _Working, fact: CallSettled | CostRaised, cost: float, calls: int, rules: DetectorRules
) -> list[Detection]:
    """`cost` more spent in the hour of the fact's call's end, by `calls` more calls (none for a later
    report's raise of a call already counted)."""
    at = fact.at
    hour = at - at % HOUR_MS
    bucket = w.spend.get(hour, SpendHour(0.0, 0))
    bucket = SpendHour(round(bucket.spend + cost, 6), bucket.calls + calls)
    w.spend[hour] = bucket
    oldest = at - (rules.baseline_days + 1) * DAY_MS
    w.spend = {h: b for h, b in w.spend.items() if h > oldest}
    if bucket.spend <= rules.spend_ceiling:
        return []
    past = [w.spend.get(hour - d * DAY_MS, SpendHour(0.0, 0)).spend for d in range(1, rules.baseline_days + 1)]
    data = {
        "number": fact.number,
        "spend": round(bucket.spend, 2),
        "ceiling": rules.spend_ceiling,
        "usual": round(sum(past) / len(past), 2),
        "calls": bucket.calls,
    }
    if fact.direction == "outbound":
        # The spend an outbound call tipped over: with its kill switch on, the account's outbound pauses.
        data["direction"] = "outbound"
    return [Detection("number.spend_exceeded", fact.number, at, data)]


def platform_degraded(w: _Working, fact: ForwardDone, rules: DetectorRules) -> list[Detection]:
    """≥ `degraded_bad` of the host's last `degraded_last` forwards within the window failed or were slow."""
    bad = fact.failed or fact.duration_ms > rules.degraded_slow_ms
    since = fact.at - rules.degraded_window_min * MIN_MS
    kept = [f for f in w.forwards.get(fact.host, ()) if f.at > since]
    kept = sorted([*kept, Forward(fact.at, fact.id, bad)], key=lambda f: (f.at, f.id))[-rules.degraded_last :]
    w.forwards[fact.host] = tuple(kept)
    # Hosts with nothing inside the window are forgotten, so a number's window stays small.
    w.forwards = {host: seen for host, seen in w.forwards.items() if seen[-1].at > since}
    recent = [f for f in kept if f.at <= fact.at]
    bad_count = sum(1 for f in recent if f.bad)
    if not bad or bad_count < rules.degraded_bad:
        return []
    data = {
        "number": fact.number,
        "host": fact.host,
        "bad": bad_count,
        "calls": len(recent),
        "slow_ms": rules.degraded_slow_ms,
        "window_min": rules.degraded_window_min,
    }
    return [Detection("platform.degraded", f"{fact.number}|{fact.host}", fact.at, data)]


def sweep_due(window: NumberWindow, at: int) -> int | None:
    """When the sweep must tick the number: at each hour's end while it is in a spike."""
    if window.spike is None:
        return None
    return at - at % HOUR_MS + HOUR_MS


def tick_after(window: NumberWindow, due: int) -> int:
    """When, by the edge's clock, a sweep may tick the number for the hour ending at `due` (event time).

    As late as the platform reports the number's calls: a tick that went out when the clock passed the
    hour's end counted the hour before its last calls arrived, and ended a spike those calls kept going.
    """
    return due + window.reported_late_ms


def pattern_matches(pattern: PatternActive, caller: str, country: str, zip_code: str | None) -> bool:
    """Whether a caller falls inside an active pattern placed on its number."""
    kind, match = pattern.pattern, pattern.match
    if kind == "rotating_numbers":
        return caller.startswith(match) and len(caller) == pattern.width
    if kind == "prefix_cluster":
        return caller.lstrip("+").startswith(match)
    if kind == "country_burst":
        return country == match
    if kind == "geo_cluster":
        return zip_code is not None and zip_code == match
    return False
