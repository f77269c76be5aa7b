"""Whose question a worker answers next (`processors.folds.queries.Waiting`): the account that has had the
least answering time while waiting, the least recently served on a tie; each account and the whole queue
are bounded."""

from __future__ import annotations

import asyncio

from processors.folds.queries import Waiting


async def drain(turns: Waiting[str], cost: dict[str, float] | None = None) -> list[str]:
    """Every waiting item in the order the worker answers them, each charged its account's cost (1 s)."""
    answered = []
    while turns.size:
        account, item = await turns.get()
        answered.append(item)
        turns.charge(account, (cost or {}).get(account, 1.0))
    return answered


async def test_a_flood_waits_behind_its_own_questions_not_another_accounts() -> None:
    turns: Waiting[str] = Waiting(per_account=10, most=100)
    for n in range(5):
        assert turns.put("flood", f"f{n}")
    assert turns.put("quiet", "q0")
    assert await drain(turns) == ["f0", "q0", "f1", "f2", "f3", "f4"]


async def test_equal_questions_take_turns_in_the_order_the_accounts_first_asked() -> None:
    turns: Waiting[str] = Waiting(per_account=10, most=100)
    for item in ("a0", "b0", "a1", "c0", "b1", "a2"):
        assert turns.put(item[0], item)
    assert await drain(turns) == ["a0", "b0", "c0", "a1", "b1", "a2"]


async def test_cheap_reads_are_not_held_back_a_turn_for_every_costly_one() -> None:
    turns: Waiting[str] = Waiting(per_account=10, most=100)
    for n in range(4):
        turns.put("flood", f"f{n}")
    account, first = await turns.get()
    # The flood's first question took 10 s of answering; the quiet account's eight take 1 s each.
    for n in range(8):
        turns.put("quiet", f"q{n}")
    turns.charge(account, 10.0)
    assert [first, *await drain(turns, {"flood": 10.0, "quiet": 1.0})] == [
        "f0",
        *(f"q{n}" for n in range(8)),
        "f1",
        "f2",
        "f3",
    ]


async def test_an_idle_spell_banks_nothing_and_forgives_nothing() -> None:
    turns: Waiting[str] = Waiting(per_account=20, most=100)
    # "busy" is answered for ten seconds, one question at a time, while "idle" asks nothing.
    for n in range(10):
        turns.put("busy", f"b{n}")
        account, _ = await turns.get()
        turns.charge(account, 1.0)
    # "idle" starts where the last answer started: one answer's catching up, not ten, then turns.
    for item in ("b10", "b11", "i0", "i1", "i2"):
        turns.put("busy" if item.startswith("b") else "idle", item)
    assert await drain(turns) == ["i0", "b10", "i1", "b11", "i2"]
    # An account that overspent and went quiet owes its time still when it asks again.
    turns.put("heavy", "h0")
    account, _ = await turns.get()
    turns.charge(account, 30.0)
    turns.put("light", "l0")
    turns.put("heavy", "h1")
    turns.put("light", "l1")
    assert await drain(turns) == ["l0", "l1", "h1"]


async def test_past_its_share_an_account_is_refused_and_the_others_are_not() -> None:
    turns: Waiting[str] = Waiting(per_account=2, most=100)
    assert [turns.put("flood", f"f{n}") for n in range(3)] == [True, True, False]
    assert turns.put("quiet", "q0")
    assert turns.size == 3
    account, _ = await turns.get()
    turns.charge(account, 1.0)
    # A question taken makes room for the next one of the same account.
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


async def test_accounts_that_stopped_asking_are_forgotten() -> None:
    turns: Waiting[str] = Waiting(per_account=5, most=500)
    for n in range(300):
        turns.put(f"a{n}", "x")
        account, _ = await turns.get()
        turns.charge(account, 0.0)
    assert len(turns._tags) <= 2 * len(turns._items) + 65
