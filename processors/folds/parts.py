"""The named parts every agent of a worker shares, built once by `processors.app`."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import faust

from domain.features import FeatureView
from domain.rules import Rules
from infra.clock import now_ms
from infra.control import Generation
from infra.settings import Settings
from processors.faults import Faults
from processors.faust.feed import Feed, FeedConductor
from processors.folds.commits import Commits
from processors.metrics import WorkerMetrics
from processors.output.appender import Appender
from processors.output.dead_letters import DeadLetters
from processors.output.replies import ReplyPath
from processors.state.mirror import Barrier, FactMirror
from processors.state.progress import Progress
from processors.state.tables import Tables

log = logging.getLogger(__name__)
Fold = Callable[[Feed], Awaitable[None]]


@dataclass(frozen=True)
class Parts:
    settings: Settings
    app: faust.App
    # Rows by key (calls, indexes, windows), written behind to their changelogs.
    tables: Tables
    # Appends of facts, alerts and ticks, each with its ack.
    appender: Appender
    # Offsets are acknowledged once the rows and appends of their folds are durable.
    commits: Commits
    progress: Progress
    # The feature view, written only by the mirror; folds wait on the barrier for their own facts.
    view: FeatureView
    mirror: FactMirror
    barrier: Barrier
    replies: ReplyPath
    metrics: WorkerMetrics
    generation: Generation
    faults: Faults
    dead_letters: DeadLetters

    @property
    def rules(self) -> Rules:
        return self.settings.rules

    def sweep_clock(self) -> int:
        """The sweeps' time: the wall clock, `Settings.sweep_clock_ahead_ms` ahead."""
        return now_ms() + self.settings.sweep_clock_ahead_ms

    def fold(self, name: str) -> Callable[[Fold], Any]:
        """A fold of topic `name`'s records, fed straight by the consumer (processors/faust/feed.py), whose failure
        stops the worker.

        A fold that fails for a reason other than its record (processors/output/dead_letters.py) would leave that
        record unfolded until the process restarts; stopping now has the restart fold it again at once.
        """
        topic = self.topic(name)
        feed = Feed(self.app, self.settings.worker_stream_buffer)
        conductor = self.app.topics
        assert isinstance(conductor, FeedConductor), "feed_folds() runs before the app is made"
        conductor.add(topic)
        conductor.feeds[self.settings.topic(name)] = feed

        def register(fold: Fold) -> Any:
            async def stopping_on_failure() -> None:
                try:
                    await fold(feed)
                except Exception as error:
                    log.error("a fold failed; stopping the worker so its restart folds the record again")
                    await self.app.crash(error)
                    raise

            return self.app.task(stopping_on_failure)

        return register

    def topic(self, name: str) -> Any:
        """A Faust topic of raw bytes (the service's records are JSON it encodes itself)."""
        return self.app.topic(self.settings.topic(name), key_type=bytes, value_type=bytes)
