"""A bound on how much of a worker's one event loop the answers to questions may take.

Questions run on the loop that folds events. Yielding after each answer lets a waiting fold in, but when
questions never stop coming they still take the loop turn about with the folds: one account looping a
listing over a large index left the folds a fraction of the loop, and every account's starts waited out
the edge's deadline (docs/hostile-runs.md, "Tenant isolation"). Here the time spent answering is charged
to a bucket that refills at `share` of the wall clock; an answer that overdraws it waits until it is
paid back, so the folds keep the rest of the loop, however many questions are queued. The credit an idle
spell banks is small (`burst_s`): questions run back to back for no longer than a fold may wait.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


class LoopShare:
    def __init__(
        self,
        share: float,
        burst_s: float = 0.005,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.share = share
        self.burst_s = burst_s
        self.clock = clock
        self.sleep = sleep
        self._credit = burst_s
        self._refilled = clock()

    def _refill(self) -> None:
        now = self.clock()
        self._credit = min(self.burst_s, self._credit + (now - self._refilled) * self.share)
        self._refilled = now

    async def spent(self, seconds: float) -> None:
        """Charge `seconds` of answering; return once the loop is the folds' again (at least one turn)."""
        self._refill()
        self._credit -= seconds
        await self.sleep(max(0.0, -self._credit / self.share))
