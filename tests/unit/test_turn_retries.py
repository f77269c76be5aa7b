"""A turn event is known by its type, role and `turn`: a client's retry under a new id counts once."""

from __future__ import annotations

from callscreen.testing import Account, Harness
from domain import live
from domain.events import TurnEnded
from domain.rules import SECOND_MS, LiveRules
from domain.times import format_ms

NOW = 1_800_000_000_000
GUARD = Account("acct_retry")
START = 1_000_000
RULES = LiveRules()


def start(call_id: str, at: int) -> dict[str, object]:
    return {
        "type": "call.started",
        "call_id": call_id,
        "to": "+14155552671",
        "from": "+19197770601",
        "at": format_ms(at),
    }


def turn_ended(event_id: str, second: int, turn: int | None) -> TurnEnded:
    return TurnEnded(
        id=event_id,
        account_id="acct_x",
        call_id="c1",
        at=START + second * SECOND_MS,
        role="user",
        turn=turn,
        hash="h" * 12,
    )


def test_a_retried_turn_under_a_new_id_is_the_same_turn() -> None:
    first = turn_ended("first", 5, 4)
    assert not live.repeated(live.LiveState(), first)
    state = live.fold(live.LiveState(), first, START, 0.0, RULES).state
    assert live.repeated(state, turn_ended("retry-1", 5, 4))
    assert not live.repeated(state, turn_ended("next", 6, 5))
    # Still known once the turn has left the events kept in order.
    for i in range(live.RECENT_KEEP + 2):
        state = live.fold(state, turn_ended(f"later-{i}", 10 + i, 100 + i), START, 0.0, RULES).state
    assert live.repeated(state, turn_ended("retry-3", 5, 4))
    # Without `turn` there is nothing to know a retry by.
    assert not live.repeated(state, turn_ended("no-index", 5, None))


def test_the_fold_answers_a_retried_turn_as_a_duplicate_and_counts_it_once() -> None:
    harness = Harness()
    assert harness.post(GUARD, start("retried", NOW), NOW)[0] == 200
    turn = {"type": "turn.ended", "call_id": "retried", "role": "user", "turn": 3, "text": "press one"}
    answers = [harness.post(GUARD, {**turn, "at": format_ms(NOW + SECOND_MS)}, NOW + i) for i in range(3)]
    assert [(status, body["user_turns"], body["flags"], body.get("duplicate")) for status, body in answers] == [
        (200, 1, [], None),
        (200, 1, [], True),
        (200, 1, [], True),
    ]
