"""Detectors (decisions.md section 9): pure functions over one protected number's window state.

`observe` folds one fact about a call to the number (a decision or a settled end) into the
number's state and returns what it detected. Windows run on event time; cooldowns, ids and
blocks therefore come out the same when the topics are replayed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from callscreen.settings import Settings
from processors.alerts import alert_id

MIN_MS = 60_000
HOUR_MS = 3_600_000
DAY_MS = 86_400_000
SEEN_KEEP = 500
# Every rule's threshold is far below this; it bounds the state of a number under a flood.
CALLS_KEEP = 400


@dataclass(frozen=True)
class DetectorRules:
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


def rules_from(settings: Settings) -> DetectorRules:
    """Every `detect_<name>` setting names one rule; the defaults are decisions.md section 9's."""
    return DetectorRules(**{f.name: getattr(settings, f"detect_{f.name}") for f in fields(DetectorRules)})


@dataclass
class Detection:
    """One alert to raise, with the block and pattern it places."""

    type: str
    subject: str
    at: int
    data: dict[str, Any]
    blocks: list[str] = field(default_factory=list)
    pattern: dict[str, Any] | None = None
    # When the same (type, subject) fired within the cooldown, this detection raises no alert;
    # its blocks and pattern belong to the alert raised at `window_start`.
    raised: bool = True
    window_start: int = 0


def new_state() -> dict[str, Any]:
    return {"calls": [], "countries": {}, "hours": {}, "spend": {}, "cooldown": {}, "spike": None, "seen": []}


def observe(state: dict[str, Any], fact: dict[str, Any], rules: DetectorRules) -> list[Detection]:
    """Fold one fact into `state` (in place) and return the alerts it raises."""
    if fact["id"] in state["seen"]:
        return []
    state["seen"] = [*state["seen"], fact["id"]][-SEEN_KEEP:]
    horizon = fact["at"] - rules.cooldown_min * MIN_MS
    state["cooldown"] = {k: v for k, v in state["cooldown"].items() if v > horizon}
    if fact["kind"] == "call.decided":
        found = _decided(state, fact, rules)
    elif fact["kind"] == "call.settled":
        found = _settled(state, fact, rules)
    else:
        return []
    if fact.get("quiet"):
        return []
    for detection in found:
        _cool(state, detection, rules)
    return found


def _cool(state: dict[str, Any], found: Detection, rules: DetectorRules) -> None:
    """One alert per (type, subject) per cooldown; the state is the account's number's own."""
    key = f"{found.type}|{found.subject}"
    last = state["cooldown"].get(key)
    if last is not None and found.at - last < rules.cooldown_min * MIN_MS:
        found.raised, found.window_start = False, last
        return
    state["cooldown"][key] = found.window_start = found.at


def _decided(state: dict[str, Any], fact: dict[str, Any], rules: DetectorRules) -> list[Detection]:
    at, caller = fact["at"], fact["caller"]
    geo = fact.get("geo") or {}
    first = fact.get("caller_first_at")
    entry = [
        at,
        caller,
        fact.get("caller_country", ""),
        first,
        geo.get("zip"),
        geo.get("city"),
        geo.get("region"),
        fact["call_id"],
    ]
    keep_from = at - max(rules.prefix_window_min, rules.geo_window_min, 60) * MIN_MS
    recent = sorted([e for e in state["calls"] if e[0] > keep_from] + [entry], key=lambda e: (e[0], e[7]))
    state["calls"] = recent[-CALLS_KEEP:]
    hour = str(at - at % HOUR_MS)
    state["hours"][hour] = state["hours"].get(hour, 0) + 1
    oldest_hour = at - (rules.baseline_days + 1) * DAY_MS
    state["hours"] = {h: n for h, n in state["hours"].items() if int(h) > oldest_hour}
    found: list[Detection] = []
    found += rate_exceeded(state, fact, rules)
    found += rotating_numbers(state, fact, rules)
    found += prefix_cluster(state, fact, rules)
    found += country_burst(state, fact, rules)
    found += geo_cluster(state, fact, rules)
    found += volume_exceeded(state, fact, rules)
    found += volume_spike(state, fact, rules)
    _remember_country(state, entry, rules)
    return found


def _window(state: dict[str, Any], at: int, minutes: int) -> list[list[Any]]:
    return [e for e in state["calls"] if at - minutes * MIN_MS < e[0] <= at]


def _fresh(entry: list[Any], window_start: int) -> bool:
    return entry[3] is None or entry[3] >= window_start


def rate_exceeded(state: dict[str, Any], fact: dict[str, Any], rules: DetectorRules) -> list[Detection]:
    caller = fact["caller"]
    count = sum(1 for e in _window(state, fact["at"], rules.rate_window_min) if e[1] == caller)
    if count <= rules.rate_calls:
        return []
    data = {
        "number": fact["number"],
        "caller": caller,
        "call_id": fact["call_id"],
        "count": count,
        "window_min": rules.rate_window_min,
    }
    return [Detection("caller.rate_exceeded", f"{caller}|{fact['number']}", fact["at"], data, blocks=[caller])]


def rotating_numbers(state: dict[str, Any], fact: dict[str, Any], rules: DetectorRules) -> list[Detection]:
    cut = rules.rotating_digits
    prefix = fact["caller"][:-cut]
    run = sorted({e[1] for e in _window(state, fact["at"], rules.rotating_window_min) if e[1][:-cut] == prefix})
    if len(run) < rules.rotating_callers:
        return []
    pattern = prefix + "X" * cut
    data = {
        "number": fact["number"],
        "call_id": fact["call_id"],
        "pattern": pattern,
        "numbers": run,
        "count": len(run),
        "window_min": rules.rotating_window_min,
    }
    active = {
        "kind": "rotating_numbers",
        "match": prefix,
        "width": len(fact["caller"]),
        "until": fact["at"] + rules.rotating_window_min * MIN_MS,
    }
    return [
        Detection(
            "caller.rotating_numbers", f"{fact['number']}|{pattern}", fact["at"], data, blocks=run, pattern=active
        )
    ]


def _digits(number: str, count: int) -> str:
    return number.lstrip("+")[:count]


def prefix_cluster(state: dict[str, Any], fact: dict[str, Any], rules: DetectorRules) -> list[Detection]:
    at, window = fact["at"], rules.prefix_window_min
    prefix = _digits(fact["caller"], rules.prefix_digits)
    calls = _window(state, at, window)
    start = at - window * MIN_MS
    fresh = {e[1] for e in calls if _digits(e[1], rules.prefix_digits) == prefix and _fresh(e, start)}
    sharing = sum(1 for e in calls if _digits(e[1], rules.prefix_digits) == prefix)
    if len(fresh) < rules.prefix_callers or sharing < rules.prefix_share * len(calls):
        return []
    data = {
        "number": fact["number"],
        "call_id": fact["call_id"],
        "pattern": f"+{prefix}*",
        "count": len(fresh),
        "window_min": window,
    }
    active = {"kind": "prefix_cluster", "match": prefix, "until": at + window * MIN_MS}
    return [Detection("number.prefix_cluster", f"{fact['number']}|{prefix}", at, data, pattern=active)]


def _remember_country(state: dict[str, Any], entry: list[Any], rules: DetectorRules) -> None:
    """Per country, its calls inside the burst window and the latest call before them."""
    at, country = entry[0], entry[2]
    if not country:
        return
    seen = state["countries"].get(country, {"recent": [], "before": None})
    horizon = at - rules.country_window_min * MIN_MS
    recent = sorted([*seen["recent"], at])
    older = [t for t in recent if t <= horizon]
    before = max([*older, seen["before"]] if seen["before"] is not None else older, default=None)
    state["countries"][country] = {"recent": [t for t in recent if t > horizon], "before": before}


def country_burst(state: dict[str, Any], fact: dict[str, Any], rules: DetectorRules) -> list[Detection]:
    country, at = fact.get("caller_country", ""), fact["at"]
    if not country:
        return []
    window_start = at - rules.country_window_min * MIN_MS
    count = sum(1 for e in _window(state, at, rules.country_window_min) if e[2] == country)
    seen = state["countries"].get(country, {"recent": [], "before": None})
    before = max(
        [t for t in seen["recent"] if t <= window_start] + ([seen["before"]] if seen["before"] else []), default=None
    )
    quiet_since = window_start - rules.country_quiet_days * DAY_MS
    if count < rules.country_calls or (before is not None and before >= quiet_since):
        return []
    data = {
        "number": fact["number"],
        "call_id": fact["call_id"],
        "country": country,
        "count": count,
        "window_min": rules.country_window_min,
    }
    active = {"kind": "country_burst", "match": country, "until": at + rules.country_window_min * MIN_MS}
    return [Detection("number.country_burst", f"{fact['number']}|{country}", at, data, pattern=active)]


def geo_cluster(state: dict[str, Any], fact: dict[str, Any], rules: DetectorRules) -> list[Detection]:
    zip_code = (fact.get("geo") or {}).get("zip")
    if not zip_code:
        return []
    at, window = fact["at"], rules.geo_window_min
    start = at - window * MIN_MS
    same = [e for e in _window(state, at, window) if e[4] == zip_code and _fresh(e, start)]
    callers = sorted({e[1] for e in same})
    if len(callers) < rules.geo_callers:
        return []
    geo = fact.get("geo") or {}
    data = {
        "number": fact["number"],
        "call_id": fact["call_id"],
        "zip": zip_code,
        "city": geo.get("city"),
        "region": geo.get("region"),
        "numbers": callers,
        "count": len(callers),
        "window_min": window,
    }
    active = {"kind": "geo_cluster", "match": zip_code, "until": at + window * MIN_MS}
    return [Detection("number.geo_cluster", f"{fact['number']}|{zip_code}", at, data, pattern=active)]


def volume_exceeded(state: dict[str, Any], fact: dict[str, Any], rules: DetectorRules) -> list[Detection]:
    count = len(_window(state, fact["at"], 60))
    if count <= rules.volume_ceiling:
        return []
    data = {"number": fact["number"], "call_id": fact["call_id"], "count": count}
    return [Detection("number.volume_exceeded", fact["number"], fact["at"], data)]


def baseline(hours: dict[str, int], hour: int, rules: DetectorRules) -> float:
    """Mean calls in the same hour of day over the last `baseline_days` days, never below the floor."""
    past = [hours.get(str(hour - d * DAY_MS), 0) for d in range(1, rules.baseline_days + 1)]
    return max(rules.spike_floor, sum(past) / len(past))


def volume_spike(state: dict[str, Any], fact: dict[str, Any], rules: DetectorRules) -> list[Detection]:
    at = fact["at"]
    hour = at - at % HOUR_MS
    calls = state["hours"].get(str(hour), 0)
    expected = baseline(state["hours"], hour, rules)
    spike = state["spike"]
    found: list[Detection] = []
    if spike is not None:
        previous = hour - HOUR_MS
        if previous >= spike["hour"] and state["hours"].get(str(previous), 0) < rules.normal_factor * baseline(
            state["hours"], previous, rules
        ):
            data = {
                "number": fact["number"],
                "minutes": (at - spike["since"]) // MIN_MS,
                "peak": spike["peak"],
                "expected": spike["expected"],
            }
            found.append(Detection("number.volume_normal", fact["number"], at, data))
            state["spike"] = spike = None
        else:
            spike["peak"] = max(spike["peak"], calls)
    if spike is None and calls >= rules.spike_factor * expected and calls >= rules.spike_min_calls:
        callers = len({e[1] for e in state["calls"] if e[0] >= hour})
        data = {"number": fact["number"], "calls": calls, "callers": callers, "expected": round(expected, 2)}
        state["spike"] = {"since": at, "hour": hour, "peak": calls, "expected": round(expected, 2)}
        found.append(Detection("number.volume_spike", fact["number"], at, data))
    return found


def _settled(state: dict[str, Any], fact: dict[str, Any], rules: DetectorRules) -> list[Detection]:
    cost = fact.get("cost")
    if not cost:
        return []
    at = fact["at"]
    hour = at - at % HOUR_MS
    spend = state["spend"]
    bucket = spend.get(str(hour), {"spend": 0.0, "calls": 0})
    bucket = {"spend": round(bucket["spend"] + cost, 6), "calls": bucket["calls"] + 1}
    spend[str(hour)] = bucket
    oldest = at - (rules.baseline_days + 1) * DAY_MS
    state["spend"] = {h: b for h, b in spend.items() if int(h) > oldest}
    if bucket["spend"] <= rules.spend_ceiling:
        return []
    past = [
        state["spend"].get(str(hour - d * DAY_MS), {"spend": 0.0})["spend"] for d in range(1, rules.baseline_days + 1)
    ]
    data = {
        "number": fact["number"],
        "spend": round(bucket["spend"], 2),
        "ceiling": rules.spend_ceiling,
        "usual": round(sum(past) / len(past), 2),
        "calls": bucket["calls"],
    }
    return [Detection("number.spend_exceeded", fact["number"], at, data)]


def detection_id(account: str, found: Detection) -> str:
    return alert_id(account, found.type, found.subject, found.window_start)


def pattern_matches(pattern: dict[str, Any], caller: str, country: str, zip_code: str | None) -> bool:
    """Whether a caller falls inside an active pattern placed on its number."""
    kind, match = pattern["kind"], pattern["match"]
    if kind == "rotating_numbers":
        return caller.startswith(str(match)) and len(caller) == pattern.get("width")
    if kind == "prefix_cluster":
        return caller.lstrip("+").startswith(str(match))
    if kind == "country_burst":
        return country == str(match)
    if kind == "geo_cluster":
        return zip_code is not None and zip_code == str(match)
    return False
