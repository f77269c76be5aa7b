"""An account's turns at answered events (ingest/event_turns.py): a few at once, the rest in order."""

from __future__ import annotations

import asyncio

import pytest

from ingest.event_turns import EventTurns, TurnRefused

LONG_S = 60.0


async def test_past_its_turns_an_account_waits_and_is_served_in_arrival_order() -> None:
    turns = EventTurns(per_account=2, waiting_per_account=8)
    await turns.take("a", LONG_S)
    await turns.take("a", LONG_S)
    served: list[int] = []

    async def waiter(n: int) -> None:
        await turns.take("a", LONG_S)
        served.append(n)

    tasks = [asyncio.create_task(waiter(n)) for n in range(3)]
    await asyncio.sleep(0)
    assert (turns.in_turn("a"), turns.waiting("a"), served) == (2, 3, [])
    turns.give_back("a")
    await asyncio.sleep(0)
    assert served == [0]
    turns.give_back("a")
    turns.give_back("a")
    await asyncio.gather(*tasks)
    assert served == [0, 1, 2]
    assert (turns.in_turn("a"), turns.waiting("a")) == (2, 0)


async def test_a_full_account_never_holds_up_another() -> None:
    turns = EventTurns(per_account=1, waiting_per_account=8)
    await turns.take("busy", LONG_S)
    blocked = asyncio.create_task(turns.take("busy", LONG_S))
    await asyncio.sleep(0)
    await asyncio.wait_for(turns.take("other", LONG_S), 1.0)
    assert (turns.in_turn("other"), turns.in_turn("busy"), turns.waiting("busy")) == (1, 1, 1)
    blocked.cancel()


async def test_a_full_queue_is_refused_at_once_and_a_late_turn_after_its_wait() -> None:
    turns = EventTurns(per_account=1, waiting_per_account=1)
    await turns.take("a", LONG_S)
    queued = asyncio.create_task(turns.take("a", LONG_S))
    await asyncio.sleep(0)
    with pytest.raises(TurnRefused) as full:
        await turns.take("a", LONG_S)
    assert full.value.waited is False
    turns.give_back("a")
    await queued
    with pytest.raises(TurnRefused) as late:
        await turns.take("a", 0.01)
    assert late.value.waited is True
    # The late waiter left its place: the turn given back now is free, not handed to it.
    assert turns.waiting("a") == 0
    turns.give_back("a")
    assert (turns.in_turn("a"), turns.waiting("a")) == (0, 0)


async def one_turn_taken_and_two_waiting() -> tuple[EventTurns, asyncio.Task[None], asyncio.Task[None]]:
    """Account `a` with its one turn taken and two takes waiting behind it, in order."""
    turns = EventTurns(per_account=1, waiting_per_account=8)
    await turns.take("a", LONG_S)
    first = asyncio.create_task(turns.take("a", LONG_S))
    second = asyncio.create_task(turns.take("a", LONG_S))
    await asyncio.sleep(0)
    return turns, first, second


async def test_a_cancelled_waiter_leaves_its_place_and_keeps_no_turn() -> None:
    turns, cancelled, after = await one_turn_taken_and_two_waiting()
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    turns.give_back("a")
    await asyncio.wait_for(after, 1.0)
    assert (turns.in_turn("a"), turns.waiting("a")) == (1, 0)


async def test_a_turn_handed_over_as_its_waiter_is_cancelled_goes_to_the_next() -> None:
    turns, first, second = await one_turn_taken_and_two_waiting()
    # The turn goes to `first`, which is cancelled before it runs again: the turn must not be lost.
    turns.give_back("a")
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    await asyncio.wait_for(second, 1.0)
    turns.give_back("a")
    assert (turns.in_turn("a"), turns.waiting("a")) == (0, 0)
