"""How far a worker has folded each partition it holds, and whether a record is a rebuild's replay."""

from __future__ import annotations

from typing import Any

import faust

from infra.control import Generation
from infra.settings import Settings


class Progress:
    def __init__(self, settings: Settings, app: faust.App, generation: Generation) -> None:
        self.settings = settings
        self.app = app
        self.generation = generation
        # Next offset to fold per (topic short name, partition): what a heartbeat reports.
        self.positions: dict[tuple[str, int], int] = {}
        # Whether this worker holds every events partition, known until the next rebalance.
        self._holds_all: bool | None = None

    def folded(self, name: str, event: Any) -> bool:
        """Note an event as folded; True when it is a replay (below the generation's targets)."""
        partition, offset = event.message.partition, event.message.offset
        self.positions[(name, partition)] = offset + 1
        return self.generation.replaying(name, partition, offset)

    async def folded_upto(self, name: str, tp: Any) -> int:
        """How far this worker has folded a partition it holds (its position until an event arrives)."""
        done = self.positions.get((name, tp.partition))
        if done is None:
            done = await self.app.consumer.position(tp) or 0
        return int(done)

    async def replay_done(self, name: str) -> bool:
        """True when every partition of `name` this worker holds is past the generation's targets."""
        targets = self.generation.targets.get(name, {})
        topic = self.settings.topic(name)
        for tp in self.app.consumer.assignment():
            if tp.topic == topic and await self.folded_upto(name, tp) < targets.get(str(tp.partition), 0):
                return False
        return True

    def holds_every_partition(self) -> bool:
        """True when this worker alone folds the events topic: its own facts are then the whole log's.

        Asked for every event; the consumer's assignment, which builds a set on each call, is read again
        only after a rebalance (`rebalanced`)."""
        if self._holds_all is None:
            topic = self.settings.topic("events")
            held = {tp.partition for tp in self.app.consumer.assignment() if tp.topic == topic}
            self._holds_all = len(held) == self.settings.partitions
        return self._holds_all

    def rebalanced(self) -> None:
        """The assignment may have changed: read it again when next asked."""
        self._holds_all = None
