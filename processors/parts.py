"""The named parts every agent of a worker shares, built once by `processors.app`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import faust

from domain.features import FeatureView
from domain.rules import Rules
from infra.control import Generation
from infra.settings import Settings
from processors.appender import Appender
from processors.barrier import Barrier
from processors.commits import Commits
from processors.dead_letters import DeadLetters
from processors.faults import Faults
from processors.metrics import WorkerMetrics
from processors.mirror import FactMirror
from processors.progress import Progress
from processors.replies import ReplyPath
from processors.tables import Tables


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

    def topic(self, name: str) -> Any:
        """A Faust topic of raw bytes (the service's records are JSON it encodes itself)."""
        return self.app.topic(self.settings.topic(name), key_type=bytes, value_type=bytes)
