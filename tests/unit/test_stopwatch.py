"""An attempt cut off by its timeout reads at least the timeout, on either event loop the service runs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop

from alerting.stopwatch import stopwatch

TIMEOUT_S = 0.02
RUNNERS: dict[str, Callable[[Coroutine[Any, Any, int]], int]] = {"uvloop": uvloop.run, "asyncio": asyncio.run}


async def timed_out_after() -> int:
    took = stopwatch()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(TIMEOUT_S):
            await asyncio.Event().wait()
    return took()


@pytest.mark.parametrize("loop", sorted(RUNNERS))
def test_a_timed_out_attempt_never_reads_shorter_than_its_timeout(loop: str) -> None:
    readings = [RUNNERS[loop](timed_out_after()) for _ in range(25)]
    assert min(readings) >= TIMEOUT_S * 1000
    # And not much longer: the loop woke it on time, not a whole scheduling round late.
    assert max(readings) < TIMEOUT_S * 1000 + 50
