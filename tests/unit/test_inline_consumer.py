"""A delivery stepped once and then handed to a task goes on exactly where it stopped."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from processors.faust.inline_consumer import _Resumed


async def test_a_resumed_coroutine_gets_each_result_it_waits_for_and_returns_its_value() -> None:
    loop = asyncio.get_running_loop()
    first: asyncio.Future[int] = loop.create_future()
    second: asyncio.Future[int] = loop.create_future()
    past_first: asyncio.Future[None] = loop.create_future()
    seen: list[int] = []

    async def deliver() -> str:
        seen.append(await first)
        past_first.set_result(None)
        seen.append(await second)
        return "delivered"

    coro = deliver()
    waiting_on = coro.send(None)
    assert waiting_on is first
    task = asyncio.ensure_future(_Resumed(coro, waiting_on))
    first.set_result(1)
    await past_first
    assert seen == [1]
    second.set_result(2)
    assert await task == "delivered"
    assert seen == [1, 2]


@pytest.mark.parametrize("first_step", [False, True], ids=["before its first step", "while it waits"])
async def test_a_cancelled_task_cancels_the_coroutine_where_it_waits(first_step: bool) -> None:
    loop = asyncio.get_running_loop()
    blocked: asyncio.Future[None] = loop.create_future()
    outcome: list[str] = []

    async def deliver() -> None:
        try:
            await blocked
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise

    coro = deliver()
    task: asyncio.Future[Any] = asyncio.ensure_future(_Resumed(coro, coro.send(None)))
    if first_step:
        stepped: asyncio.Future[None] = loop.create_future()
        loop.call_soon(stepped.set_result, None)
        await stepped
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert outcome == ["cancelled"]
    assert blocked.cancelled() is first_step
