"""Each live flag at its threshold and one step below it, on plain data (docs/rules.md, The live monitor)."""

from __future__ import annotations

import itertools
import random
from typing import Any

import msgspec

from domain import live
from domain.events import Interruption, Tick, Transcript, Turn, TurnEnded, TurnStarted
from domain.rules import LiveRules

TH = LiveRules()
START = 1_000_000
_ids = itertools.count()
KINDS: dict[str, type[Turn]] = {
    "turn.started": TurnStarted,
    "turn.ended": TurnEnded,
    "interruption": Interruption,
    "transcript": Transcript,
}
Event = Turn | Tick


def ev(kind: str, second: float, **fields: Any) -> Event:
    event_id, at = f"e{next(_ids):05d}", START + int(second * 1000)
    if kind == "tick":
        return Tick(id=event_id, account_id="acct_x", call_id="c1", at=at)
    return KINDS[kind](id=event_id, account_id="acct_x", call_id="c1", at=at, **{"role": "user", **fields})


def picture(events: list[Event], started_at: int, start_score: float, rules: LiveRules) -> live.LiveState:
    """The picture after `events`, folded in the order given."""
    state = live.LiveState()
    for event in events:
        state = live.fold(state, event, started_at, start_score, rules).state
    return state


def flags(events: list[Event]) -> list[str]:
    return list(picture(events, START, 0.0, TH).flags)


def caller_turn(begin: float, end: float, **fields: Any) -> list[Event]:
    return [ev("turn.started", begin, role="user"), ev("turn.ended", end, role="user", **fields)]


def test_recording_likely_by_seconds() -> None:
    assert flags(caller_turn(0, 44.999)) == []
    assert flags(caller_turn(0, 45)) == ["recording_likely"]


def test_recording_likely_by_words() -> None:
    assert flags([ev("turn.ended", 5, role="user", words=119)]) == []
    assert flags([ev("turn.ended", 5, role="user", words=120)]) == ["recording_likely"]


def test_monologue_needs_three_turns_averaging_twenty_seconds() -> None:
    two = caller_turn(0, 20) + caller_turn(30, 50)
    assert flags(two) == []
    below = two + caller_turn(60, 79.9)
    assert flags(below) == []
    assert flags(two + caller_turn(60, 80)) == ["monologue"]


def test_monologue_by_words() -> None:
    turns = [ev("turn.ended", i * 10, role="user", words=60) for i in range(3)]
    assert flags(turns) == ["monologue"]
    turns[-1] = msgspec.structs.replace(turns[-1], words=59)
    assert flags(turns) == []


def test_barge_storm_six_interruptions_within_sixty_seconds() -> None:
    five = [ev("interruption", s) for s in (0, 10, 20, 30, 40)]
    assert flags([*five, ev("interruption", 60)]) == []
    assert flags([*five, ev("interruption", 59.9)]) == ["barge_storm"]


def test_rapid_fire_eight_caller_turns_within_ten_seconds() -> None:
    seven = [ev("turn.started", s, role="user") for s in range(7)]
    assert flags([*seven, ev("turn.started", 10, role="user")]) == []
    assert flags([*seven, ev("turn.started", 9.9, role="user")]) == ["rapid_fire"]
    agent_turns = [ev("turn.started", s, role="agent") for s in range(8)]
    assert flags(agent_turns) == []


def test_repeated_turns_same_hash_three_times() -> None:
    twice = [ev("turn.ended", s, role="user", hash="abcdefabcdef") for s in (1, 2)]
    assert flags([*twice, ev("turn.ended", 3, role="user", hash="000000000000")]) == []
    # A transcript for a turn not otherwise reported is that turn's text.
    assert flags([*twice, ev("transcript", 3, role="user", turn=7, hash="abcdefabcdef")]) == ["repeated_turns"]
    agent = [ev("turn.ended", s, role="agent", hash="abcdefabcdef") for s in (1, 2, 3)]
    assert flags(agent) == []


def test_silent_listener_a_minute_in_with_the_agent_talking() -> None:
    agent = [ev("turn.started", 2, role="agent")]
    assert flags([*agent, ev("tick", 59.999)]) == []
    assert flags([*agent, ev("tick", 60)]) == ["silent_listener"]
    assert flags([*agent, ev("turn.started", 30, role="user"), ev("tick", 60)]) == []
    assert flags([ev("tick", 61)]) == []


def test_one_sided_two_hundred_caller_words_and_at_most_ten_percent_from_the_agent() -> None:
    def call(agent_words: int, caller_words: int) -> list[Event]:
        first = caller_words // 2
        return [
            ev("turn.ended", 1, role="agent", words=agent_words),
            ev("turn.ended", 2, role="user", words=first),
            ev("turn.ended", 3, role="user", words=caller_words - first),
        ]

    assert flags(call(20, 199)) == []
    assert flags(call(20, 200)) == ["one_sided"]
    assert flags(call(21, 200)) == []


def test_score_rises_with_each_flag_and_starts_from_the_start_score() -> None:
    events = [*caller_turn(0, 50), *(ev("turn.started", 60 + s, role="user") for s in range(8))]
    pic = picture(events, START, 0.25, TH)
    assert pic.flags == ("recording_likely", "rapid_fire")
    assert pic.score == round(1 - 0.75 * 0.4 * 0.4, 4)
    assert pic.first_alert_at == START + 50_000


def test_arrival_order_changes_no_count_and_takes_away_no_flag() -> None:
    events = [*caller_turn(0, 50, words=10, hash="aaaaaaaaaaaa"), *(ev("interruption", 5 + s) for s in range(7))]
    events += [ev("turn.ended", 70 + s, role="agent", words=3) for s in range(4)]
    expected = picture(events, START, 0.1, TH)
    for seed in range(5):
        shuffled = list(events)
        random.Random(seed).shuffle(shuffled)
        current = picture(shuffled, START, 0.1, TH).current
        assert msgspec.structs.replace(current, flags=()) == msgspec.structs.replace(expected.current, flags=())
        # A flag an earlier arrival tripped stays, as a live score stays up.
        assert set(expected.current.flags) <= set(current.flags)


def test_counts_and_talk_time() -> None:
    events = [
        *caller_turn(0, 4, words=5),
        ev("turn.started", 5, role="agent"),
        ev("turn.ended", 11, role="agent", words=9),
    ]
    # The caller's transcript without `turn` is the final text of its latest turn: no turn more.
    events.append(ev("transcript", 12, role="user", words=3))
    pic = picture(events, START, 0.0, TH)
    assert (pic.user_turns, pic.agent_turns, pic.interruptions) == (1, 1, 0)
    now = pic.current
    assert (now.user_talk_s, now.agent_talk_s, now.user_words, now.agent_words) == (4.0, 6.0, 3, 9)


def test_every_folded_event_is_known_once_and_its_id_is_kept_once() -> None:
    in_order = [ev("turn.started", s, role="user") for s in range(live.RECENT_KEEP + 10)]
    late = ev("turn.ended", -1, role="user")
    state = picture([*in_order, late], START, 0.0, TH)
    # The ten oldest and the late one are in the checkpoint; the recent steps carry their own ids.
    assert len(state.recent) == live.RECENT_KEEP
    assert set(state.seen) == {e.id for e in in_order[:10]} | {late.id}
    assert not set(state.seen) & {step.id for step in state.recent}
    assert all(live.already_folded(state, e.id) for e in [*in_order, late])
    assert not live.already_folded(state, "e-never")


def test_a_row_whose_seen_also_holds_the_recent_ids_folds_as_before() -> None:
    events = [ev("turn.started", s, role="user") for s in range(live.RECENT_KEEP + 3)]
    state = picture(events[:-3], START, 0.0, TH)
    # Rows written before `seen` left out the recent steps' ids held them twice.
    older = msgspec.structs.replace(state, seen=tuple(step.id for step in state.recent))
    for event in events[-3:]:
        state = live.fold(state, event, START, 0.0, TH).state
        older = live.fold(older, event, START, 0.0, TH).state
    assert older.current == state.current and older.recent == state.recent
    assert all(live.already_folded(older, e.id) for e in events)
