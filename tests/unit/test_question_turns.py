"""Whose question a worker answers next (`processors.folds.queries.Waiting`): accounts take turns, one item
each, in the order they first asked; each account and the whole queue are bounded."""

from __future__ import annotations

import asyncio

from processors.folds.queries import Waiting


async def drain(turns: Waiting[str]) -> list[str]:
    """Every waiting item in the order the worker answers them."""
    answered = []
    while turns.size:
        account, item = await turns.get()
        answered.append(item)
        turns.done(account)
    return answered


async def test_a_flood_waits_behind_its_own_questions_not_another_accounts() -> None:
    turns: Waiting[str] = Waiting(per_account=10, most=100)
    for n in range(5):
        assert turns.put("flood", f"f{n}")
    assert turns.put("quiet", "q0")
    assert await drain(turns) == ["f0", "q0", "f1", "f2", "f3", "f4"]


async def test_accounts_alternate_in_the_order_they_first_asked() -> None:
    turns: Waiting[str] = Waiting(per_account=10, most=100)
    for item in ("a0", "b0", "a1", "c0", "b1", "a2"):
        assert turns.put(item[0], item)
    assert await drain(turns) == ["a0", "b0", "c0", "a1", "b1", "a2"]
    # An account that emptied its queue asks again at the back of the turns.
    for item in ("b2", "a3", "a4"):
        turns.put(item[0], item)
    assert await drain(turns) == ["b2", "a3", "a4"]


async def test_past_its_share_an_account_is_refused_and_the_others_are_not() -> None:
    turns: Waiting[str] = Waiting(per_account=2, most=100)
    assert [turns.put("flood", f"f{n}") for n in range(3)] == [True, True, False]
    assert turns.put("quiet", "q0")
    assert turns.size == 3
    account, _ = await turns.get()
    turns.done(account)
    # A question answered makes room for the next one of the same account.
    assert turns.put("flood", "f3")


async def test_past_the_whole_bound_every_account_is_refused() -> None:
    turns: Waiting[str] = Waiting(per_account=5, most=3)
    assert [turns.put(account, account) for account in ("a", "b", "c", "d")] == [True, True, True, False]
    assert await turns.get() == ("a", "a")
    assert turns.put("d", "d")


async def test_get_waits_for_the_first_item() -> None:
    turns: Waiting[str] = Waiting(per_account=5, most=5)
    waiting = asyncio.ensure_future(turns.get())
    await asyncio.sleep(0)
    assert not waiting.done()
    turns.put("a", "a0")
    assert await asyncio.wait_for(waiting, 1) == ("a", "a0")
    assert turns.size == 0
