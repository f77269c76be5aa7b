"""Read-your-writes through the log: a start waits until what it reads is in the feature view.

A start reads the blocks and patterns on its number, which the detector places when it folds the
facts of the starts before it. So before a start is folded the worker waits until its detector has
folded the last fact this worker appended about the number (the facts themselves are in the view
already: the mirror applies a worker's own facts as they are appended). A rebalance can hand the
partition to another worker, so the wait is bounded by `wait_s`. With the partitions shared between
workers, `level` waits for every fact in the log instead.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from processors.mirror import FactMirror

log = logging.getLogger(__name__)
# Entries kept before a prune. Each holds a future and its record metadata (about half a kilobyte), and a
# worker sees every number it protects: at 10,000 this dict alone grew the worker by megabytes in a soak.
KEEP = 1_000


class Barrier:
    def __init__(self, mirror: FactMirror, wait_s: float) -> None:
        self.mirror = mirror
        self.wait_s = wait_s
        # The ack of the last fact this worker appended about each number (account:number).
        self.last_fact: dict[str, asyncio.Future[Any]] = {}
        self._prune_at = KEEP
        self.detected: dict[int, int] = {}
        self.detector_moved = asyncio.Event()

    def appended(self, number_key: str, ack: asyncio.Future[Any]) -> None:
        self.last_fact[number_key] = ack
        if len(self.last_fact) > self._prune_at:
            # Only facts the detector has folded go: an acknowledged one it has not yet folded is still waited on.
            self.last_fact = {k: a for k, a in self.last_fact.items() if not self._folded(a)}
            # With the detector far behind most entries stay; pruning again at twice what stayed keeps
            # the cost of pruning constant per append.
            self._prune_at = max(KEEP, 2 * len(self.last_fact))

    def detector_folded(self, partition: int, offset: int) -> None:
        self.detected[partition] = offset + 1
        self.detector_moved.set()

    def _folded(self, ack: asyncio.Future[Any]) -> bool:
        if not ack.done() or ack.cancelled() or ack.exception() is not None:
            return False
        metadata = ack.result()
        return self._past(metadata.partition, metadata.offset)

    def _past(self, partition: int, offset: int) -> bool:
        """The detector has folded the fact at this offset: what the prune and the wait both ask."""
        return self.detected.get(partition, 0) > offset

    async def consequences_of(self, number_key: str) -> None:
        """Until the detector has folded the last fact this worker appended about the number."""
        ack = self.last_fact.pop(number_key, None)
        if ack is None:
            return
        metadata = await ack
        try:
            await asyncio.wait_for(self._detector_past(metadata.partition, metadata.offset), self.wait_s)
        except TimeoutError:
            log.warning("detector behind a fact this worker appended; folding without waiting")

    async def _detector_past(self, partition: int, offset: int) -> None:
        while not self._past(partition, offset):
            self.detector_moved.clear()
            await self.detector_moved.wait()

    async def level(self) -> None:
        """Until the view holds every fact appended before this call, whichever worker appended it."""
        if not await self.mirror.applied(await self.mirror.ends(), self.wait_s):
            log.warning("facts mirror behind the log; folding on what it holds")
