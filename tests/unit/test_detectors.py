"""Each detector at its threshold and one below, and the cooldown boundary (docs/rules.md, Detectors)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from domain.alerts import Alert
from domain.detectors import NumberWindow, observe, pattern_matches, tick_after
from domain.facts import (
    BlockPlaced,
    CallDecided,
    CallSettled,
    Fact,
    ForwardDone,
    PatternActive,
)
from domain.rules import DetectorRules, ScoringRules
from tests.facts import NUMBER, call_decided

RULES = DetectorRules()
MIN = 60_000
HOUR = 3_600_000
T0 = 1_700_000_000_000 - 1_700_000_000_000 % HOUR
_ids = itertools.count()


def decided(caller: str, minute: float, **fields: Any) -> CallDecided:
    at = T0 + int(minute * MIN)
    return call_decided(
        next(_ids),
        at,
        caller,
        caller_country=fields.pop("country", "US"),
        caller_first_at=fields.pop("first", None),
        geo=fields.pop("geo", None),
        quiet=fields.pop("quiet", False),
        received_at=at + fields.pop("late_ms", 0),
    )


class Window:
    """One number's window across several runs of facts."""

    def __init__(self) -> None:
        self.state = NumberWindow()
        self.facts: list[Fact] = []

    def run(self, facts: Sequence[Fact]) -> list[Alert]:
        raised: list[Alert] = []
        for fact in facts:
            observed = observe(self.state, fact, RULES, ScoringRules())
            self.state = observed.window
            raised += observed.alerts
            self.facts += observed.facts
        return raised


def run(facts: Sequence[Fact]) -> list[Alert]:
    return Window().run(facts)


def types(found: list[Alert]) -> list[str]:
    return [a.type for a in found]


def test_rate_exceeded_on_the_sixth_call_in_ten_minutes() -> None:
    five = [decided("+447911200001", i * 2) for i in range(5)]
    assert "caller.rate_exceeded" not in types(run(five))
    found = run([*five, decided("+447911200001", 9.9)])
    assert types(found).count("caller.rate_exceeded") == 1
    six_over_eleven_minutes = [decided("+447911200001", i * 2.2) for i in range(6)]
    assert "caller.rate_exceeded" not in types(run(six_over_eleven_minutes))


def test_rotating_numbers_at_four_callers_of_one_run() -> None:
    three = [decided(f"+1212555700{i}", i) for i in range(3)]
    assert "caller.rotating_numbers" not in types(run(three))
    window = Window()
    found = [a for a in window.run([*three, decided("+12125557003", 3)]) if a.type == "caller.rotating_numbers"]
    assert len(found) == 1
    assert [f.caller for f in window.facts if isinstance(f, BlockPlaced)] == [f"+1212555700{i}" for i in range(4)]
    assert found[0].data["pattern"] == "+121255570XX"
    other_run = [*three, decided("+12125557103", 3)]
    assert "caller.rotating_numbers" not in types(run(other_run))


def test_prefix_cluster_needs_ten_fresh_callers_and_half_the_calls() -> None:
    nine = [decided(f"+13125551{i}0{i}", i) for i in range(9)]
    assert "number.prefix_cluster" not in types(run(nine))
    assert "number.prefix_cluster" in types(run([*nine, decided("+13125551909", 9)]))
    known = [*nine, decided("+13125551909", 9, first=T0 - HOUR)]
    assert "number.prefix_cluster" not in types(run(known))
    crowd = [decided(f"+1646{i:03d}{i:04d}", 0.1 * i) for i in range(11)]
    assert "number.prefix_cluster" not in types(run([*crowd, *nine, decided("+13125551909", 9)]))


def test_country_burst_at_ten_calls_from_a_quiet_country() -> None:
    nine = [decided(f"+336123{i:05d}", i, country="FR") for i in range(9)]
    assert "number.country_burst" not in types(run(nine))
    assert "number.country_burst" in types(run([*nine, decided("+33612399999", 9, country="FR")]))
    heard_before = [decided("+33611111111", -6 * 24 * 60, country="FR")]
    assert "number.country_burst" not in types(run([*heard_before, *nine, decided("+33612399999", 9, country="FR")]))
    long_ago = [decided("+33611111111", -8 * 24 * 60, country="FR")]
    assert "number.country_burst" in types(run([*long_ago, *nine, decided("+33612399999", 9, country="FR")]))


def test_geo_cluster_at_five_fresh_callers_in_one_zip() -> None:
    geo = {"zip": "73301", "city": "Austin", "region": "TX"}
    four = [decided(f"+1512{i}{i}{i}0{i}{i}{i}", i, geo=geo) for i in range(4)]
    assert "number.geo_cluster" not in types(run(four))
    assert "number.geo_cluster" in types(run([*four, decided("+15129990999", 4, geo=geo)]))
    elsewhere = [*four, decided("+15129990999", 4, geo={**geo, "zip": "73302"})]
    assert "number.geo_cluster" not in types(run(elsewhere))


def test_volume_exceeded_past_120_in_an_hour() -> None:
    calls = [decided(f"+1646{i:03d}{i:04d}", i * 0.45) for i in range(120)]
    assert "number.volume_exceeded" not in types(run(calls))
    assert "number.volume_exceeded" in types(run([*calls, decided("+16469990000", 55)]))


def test_volume_spike_at_three_times_baseline_and_twenty_calls() -> None:
    history = [decided(f"+1718000{d:04d}", -d * 24 * 60 + 1) for d in range(1, 8) for _ in range(10)]
    this_hour = [decided(f"+1718{i:03d}{i:04d}", 2 + i) for i in range(29)]
    assert "number.volume_spike" not in types(run([*history, *this_hour]))
    assert "number.volume_spike" in types(run([*history, *this_hour, decided("+17189990000", 40)]))
    nineteen = [decided(f"+1718{i:03d}{i:04d}", 2 + i) for i in range(19)]
    assert "number.volume_spike" not in types(run(nineteen))
    assert "number.volume_spike" in types(run([*nineteen, decided("+17189990001", 30)]))


def test_volume_normal_after_an_hour_back_under_one_and_a_half_baseline() -> None:
    spike = [decided(f"+1718{i:03d}{i:04d}", i) for i in range(20)]
    busy_next_hour = [decided(f"+1719{i:03d}{i:04d}", 60 + i) for i in range(8)]
    assert "number.volume_normal" not in types(run([*spike, *busy_next_hour, decided("+17190000001", 125)]))
    quiet_next_hour = [decided(f"+1719{i:03d}{i:04d}", 60 + i) for i in range(7)]
    found = run([*spike, *quiet_next_hour, decided("+17190000001", 125)])
    normal = [a for a in found if a.type == "number.volume_normal"]
    assert len(normal) == 1
    assert normal[0].data == {"number": NUMBER, "minutes": 106, "peak": 20, "expected": 5.0}


def test_spend_exceeded_past_25_dollars_in_an_hour() -> None:
    def settled(minute: int, cost: float) -> CallSettled:
        n = next(_ids)
        return CallSettled(
            id=f"s{n}",
            account_id="acct_x",
            number=NUMBER,
            at=T0 + minute * MIN,
            call_id=f"c{n}",
            caller="+1",
            duration_s=60,
            spam_score=0,
            cost=cost,
            quiet=False,
        )

    assert "number.spend_exceeded" not in types(run([settled(1, 20.0), settled(2, 5.0)]))
    assert "number.spend_exceeded" in types(run([settled(1, 20.0), settled(2, 5.01)]))
    assert "number.spend_exceeded" not in types(run([settled(1, 20.0), settled(61, 20.0)]))


def forward(minute: float, ms: int = 200, failed: bool = False, host: str = "agent.example.com") -> ForwardDone:
    n = next(_ids)
    return ForwardDone(
        id=f"w{n}",
        account_id="acct_x",
        number=NUMBER,
        at=T0 + int(minute * MIN),
        call_id=f"CA{n}",
        host=host,
        duration_ms=ms,
        failed=failed,
    )


def test_platform_degraded_at_three_bad_of_the_last_ten_within_five_minutes() -> None:
    # Slow means over 3 s: 3000 ms is not slow, 3001 ms is.
    assert run([forward(0, 3000), forward(1, 3000), forward(2, 3000)]) == []
    found = run([forward(0, failed=True), forward(1, 3001), forward(2), forward(3, failed=True)])
    assert types(found) == ["platform.degraded"]
    assert found[0].severity == "critical"
    assert found[0].data == {
        "number": NUMBER,
        "host": "agent.example.com",
        "bad": 3,
        "calls": 4,
        "slow_ms": 3000,
        "window_min": 5,
    }
    # Five minutes or more apart, the bad ones do not add up.
    assert run([forward(0, failed=True), forward(2.5, failed=True), forward(5, failed=True)]) == []
    # Only the last ten count: two bad ones pushed out by ten good ones.
    pushed = [forward(0, failed=True), forward(0.1, failed=True), *(forward(0.2 + i / 100) for i in range(9))]
    assert run([*pushed, forward(1, failed=True)]) == []
    # Each host on its own.
    hosts = [forward(0, failed=True, host="a.example"), forward(1, failed=True, host="b.example")]
    assert run([*hosts, forward(2, failed=True, host="a.example")]) == []


def test_platform_degraded_follows_the_cooldown_and_replays_count_once() -> None:
    window = Window()
    bad = [forward(i, failed=True) for i in range(3)]
    assert types(window.run(bad)) == ["platform.degraded"]
    assert window.run([*bad, forward(3, failed=True)]) == []
    assert window.run([forward(18, failed=True)]) == []
    assert types(window.run([forward(18.5, failed=True), forward(19, failed=True)])) == ["platform.degraded"]


def test_cooldown_holds_for_fourteen_fifty_nine_and_ends_at_fifteen() -> None:
    caller = "+447911200009"
    burst = [decided(caller, i * 0.1) for i in range(6)]
    for gap, raised in ((14 * 60 + 59, False), (15 * 60, True)):
        window = Window()
        first = window.run(burst)
        assert types(first).count("caller.rate_exceeded") == 1
        late = [decided(caller, 0.5 + gap / 60 - i * 0.01) for i in range(5, -1, -1)]
        again = [a for a in window.run(late) if a.type == "caller.rate_exceeded"]
        assert bool(again) is raised, gap


def test_suppressed_detections_keep_the_first_alert_window() -> None:
    window = Window()
    (first,) = window.run([decided("+447911200010", i * 0.1) for i in range(6)])
    assert window.run([decided("+447911200010", 1)]) == []
    # The later call's block belongs to the first alert: same id, same window.
    blocks = [f for f in window.facts if isinstance(f, BlockPlaced)]
    assert [b.alert_id for b in blocks] == [first.id, first.id]
    assert blocks[0].since == blocks[1].since


def test_quiet_facts_raise_nothing_and_replays_count_once() -> None:
    quiet = [decided("+447911200011", i * 0.1, quiet=True) for i in range(8)]
    assert run(quiet) == []
    window = Window()
    fact = decided("+447911200012", 0)
    window.run([fact, fact, fact])
    assert len(window.state.calls) == 1


def pattern(kind: str, match: str, width: int | None = None) -> PatternActive:
    return PatternActive(
        id="p",
        account_id="acct_x",
        number=NUMBER,
        at=T0,
        alert_id="a",
        pattern=kind,
        match=match,
        width=width,
        since=T0,
        until=T0 + HOUR,
    )


def test_pattern_matching() -> None:
    rotating = pattern("rotating_numbers", "+121255570", 12)
    assert pattern_matches(rotating, "+12125557042", "US", None)
    assert not pattern_matches(rotating, "+121255570421", "US", None)
    assert pattern_matches(pattern("prefix_cluster", "13125551"), "+13125551999", "US", None)
    assert pattern_matches(pattern("country_burst", "FR"), "+33612345678", "FR", None)
    assert not pattern_matches(pattern("geo_cluster", "73301"), "+15125550000", "US", None)


def test_a_number_is_ticked_as_late_as_its_latest_call_was_reported() -> None:
    window = Window()
    window.run([decided("+12125550001", 0, late_ms=2 * MIN)])
    assert tick_after(window.state, T0 + HOUR) == T0 + HOUR + 2 * MIN
    # Imported history says nothing of how the platform reports its calls.
    window.run([decided("+12125550002", 1, late_ms=3 * 24 * HOUR, quiet=True)])
    assert tick_after(window.state, T0 + HOUR) == T0 + HOUR + 2 * MIN
    window.run([decided("+12125550003", 2)])
    assert tick_after(window.state, T0 + HOUR) == T0 + HOUR
    # Received before its own time (the platform's clock ahead): on time.
    window.run([decided("+12125550004", 3, late_ms=-MIN)])
    assert tick_after(window.state, T0 + HOUR) == T0 + HOUR
