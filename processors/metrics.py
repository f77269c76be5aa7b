"""A worker's Prometheus instruments: fold latency, changelog records, consumer lag, replay progress,
RocksDB memory."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from infra.metrics import lag_gauge

FOLD_BUCKETS = (0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5)


@dataclass
class WorkerMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        self.fold_seconds = Histogram(
            "callscreen_fold_seconds",
            "Time to fold one record (table writes, facts, answer), by source topic.",
            ["topic"],
            buckets=FOLD_BUCKETS,
            registry=self.registry,
        )
        self.changelog_records = Counter(
            "callscreen_changelog_records",
            "Table changelog records sent (each changed key once per flush, however often it was written).",
            registry=self.registry,
        )
        self.lag = lag_gauge(self.registry)
        self.dead_letters = Counter(
            "callscreen_dead_letters",
            "Records set aside on the dead_letters topic because no fold could handle them, by source topic.",
            ["topic"],
            registry=self.registry,
        )
        self.replay_remaining = Gauge(
            "callscreen_replay_remaining_records",
            "Records of a rebuild's replay this worker has still to fold, by topic.",
            ["topic"],
            registry=self.registry,
        )
        self.rocksdb_bytes = Gauge(
            "callscreen_rocksdb_bytes",
            "Memory of the worker's RocksDB budget in use: block cache and the memtables charged to it.",
            registry=self.registry,
        )
        self.questions_expired = Counter(
            "callscreen_questions_expired",
            "Questions left unanswered because the edge's answer deadline had passed when their turn came.",
            registry=self.registry,
        )
        self.questions_refused = Counter(
            "callscreen_questions_refused",
            "Questions answered 503 at once because their account's turn at the worker's questions was full.",
            registry=self.registry,
        )
        self.checkpoints = Counter(
            "callscreen_table_checkpoints",
            "Times the worker wrote its RocksDB memtables to disk (`table_checkpoint_s`): what a kill keeps.",
            registry=self.registry,
        )
        self.recovered_rows = Counter(
            "callscreen_recovered_rows",
            "Table rows recovery wrote from the changelogs since the worker started: after a kill, those"
            " written since the last checkpoint, not the tables' size.",
            registry=self.registry,
        )
        self.generation = Gauge(
            "callscreen_generation", "The generation of derived state this worker folds.", registry=self.registry
        )
