"""The Faust app of one worker: its parts and its agents, wired around the domain's pure folds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import faust

from domain.features import FeatureView
from infra.control import SOURCE_TOPICS, Generation
from infra.kafka import MEMORY_BATCH_BYTES, bootstrap, tls_context
from infra.membership import group_instance
from infra.metrics import serve as serve_metrics
from infra.settings import Settings
from processors import housekeeping
from processors.faults import Faults
from processors.faust import patches
from processors.faust.patches import PromptTableManager
from processors.folds import alerts, calls, detectors, queries
from processors.folds.commits import Commits
from processors.folds.parts import Parts
from processors.metrics import WorkerMetrics
from processors.output.appender import Appender
from processors.output.dead_letters import DeadLetters
from processors.output.replies import ReplyPath
from processors.state.mirror import Barrier, FactMirror
from processors.state.progress import Progress
from processors.state.rocks import RocksBudget, RocksStore
from processors.state.row_cache import RowCache
from processors.state.tables import Tables

# The longest a fold waits for its own facts to be applied (a rebalance can move the partition away).
BARRIER_WAIT_S = 1.0


def poll_records(settings: Settings) -> int:
    """Records one poll hands to the folds: at most what fits above the buffer's high-water mark once
    from each partition of a topic.

    A partition is not fetched once its fold's buffer is 4/5 full (processors/faust/feed.py), but a poll hands
    over everything fetched already. Unbounded, that is a megabyte per partition, and a buffer far over
    its size (docs/architecture.md, "Backlogs")."""
    return max(1, settings.worker_stream_buffer // (5 * settings.partitions))


def make_faust_app(settings: Settings, app_id: str, datadir: Path, instance_id: str | None = None) -> faust.App:
    """A Faust app with the worker's settings (also the bench's Faust floor), made after `patches.install`;
    a static member of its group under `instance_id` when one is given (`infra/membership.py`)."""
    extra: dict[str, Any] = {}
    if settings.memory_broker:
        extra["producer_max_batch_size"] = MEMORY_BATCH_BYTES
    credentials = faust_credentials(settings)
    if credentials is not None:
        extra["broker_credentials"] = credentials
    return faust.App(
        app_id,
        broker="kafka://" + bootstrap(settings),
        store="rocksdb://",
        datadir=str(datadir),
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication_factor,
        web_enabled=False,
        consumer_auto_offset_reset="earliest",
        processing_guarantee="at_least_once",
        producer_acks=-1,
        producer_linger=0.0,
        broker_commit_every=100,
        broker_session_timeout=10.0,
        broker_heartbeat_interval=1.0,
        broker_rebalance_timeout=10.0,
        broker_commit_interval=0.5,
        stream_wait_empty=False,
        broker_max_poll_records=poll_records(settings),
        stream_buffer_maxsize=settings.worker_stream_buffer,
        key_serializer="raw",
        value_serializer="raw",
        consumer_group_instance_id=instance_id,
        # Faust's leader election topic serves `on_leader` timers, and the worker has none. Declared at each
        # start, it joined the group a moment after its creation: on a new broker the assignor then asked
        # for it before the broker listed it, and aiokafka logged that at error level.
        topic_disable_leader=True,
        TableManager=PromptTableManager,
        **extra,
    )


def faust_credentials(settings: Settings) -> Any:
    """The deployment's TLS and SASL settings in Faust's terms (aiokafka gets them from infra.kafka)."""
    context = tls_context(settings)
    if settings.kafka_security_protocol.upper().startswith("SASL"):
        return faust.SASLCredentials(
            username=settings.kafka_sasl_username,
            password=settings.kafka_sasl_password,
            ssl_context=context,
            mechanism=settings.kafka_sasl_mechanism.upper(),
        )
    if context is not None:
        return faust.SSLCredentials(context)
    return None


def create_app(settings: Settings, worker_dir: Path, generation: Generation) -> faust.App:
    """One worker: its parts, then each agent registered around them."""
    patches.install(settings)
    app = make_faust_app(settings, generation.app_id(settings), worker_dir / "faust", group_instance(worker_dir))
    rocks = RocksBudget(settings.rocksdb_memory_mb)
    view_store = RocksStore(worker_dir / "features", rocks, check=settings.row_cache_check)
    view = FeatureView(view_store, settings.rules.scoring)
    progress = Progress(settings, app, generation)
    mirror = FactMirror(settings, view, generation, progress.holds_every_partition)
    appender = Appender(settings)
    rows = RowCache(settings.row_cache_mb * 1024 * 1024, check=settings.row_cache_check)
    metrics = WorkerMetrics()
    tables = Tables(app, settings.partitions, rocks, settings.max_value_bytes, rows, metrics.recovered_rows.inc)
    replies = ReplyPath(appender, settings.reply_token)
    faults = Faults(settings.faults, Path(settings.data_dir))
    parts = Parts(
        settings=settings,
        app=app,
        tables=tables,
        appender=appender,
        commits=Commits(
            app,
            settings.topic,
            frozenset(map(settings.topic, SOURCE_TOPICS)),
            tables,
            view_store,
            appender,
            metrics,
            faults,
            settings.worker_unacknowledged_max,
        ),
        progress=progress,
        view=view,
        mirror=mirror,
        barrier=Barrier(mirror, BARRIER_WAIT_S),
        replies=replies,
        metrics=metrics,
        generation=generation,
        faults=faults,
        dead_letters=DeadLetters(appender, metrics, replies),
    )
    metrics.rocksdb_bytes.set_function(rocks.cache.get_usage)
    for agents in (calls, detectors, alerts, queries, housekeeping):
        agents.register(parts)
    serve_metrics(settings, metrics.registry)
    return app
