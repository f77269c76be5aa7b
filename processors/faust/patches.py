"""Where Faust needs correcting: two waits of its consumer, where it may commit, and a wait at start.

The waits: how long an empty fetch is held, and the prefetch backoff.

Faust hard-codes `fetch_max_wait_ms=1500`; the worker uses the service's settings instead: the short
`worker_fetch_max_wait_ms` for a fetch that leaves out a partition (one still buffered or paused, whose
next fetch waits for it: docs/architecture.md, "The long poll"), the long `fetch_max_wait_ms` for a fetch
that names every partition, which the broker answers as soon as any of them has a record. An idle worker
on the short wait alone sent fifty empty fetches a second: 5% of a core, and 5% of its broker's. On the
in-memory development broker aiokafka's 100 ms prefetch backoff also put ~100 ms stalls into about
3% of answers (300 sequential starts: p99 105 ms before, 18 ms after a 5 ms backoff). On Kafka the
short backoff is harmful: the fetcher then sends a long poll that leaves out the partition still
being consumed, and that partition's next record waits for the poll to end (50 concurrent starts
missed the 2 s answer deadline with it). Applied once, before the app starts. Upstream: no issue reports
either; the wait is a literal in `faust.transport.drivers.aiokafka.AIOKafkaConsumerThread._create_worker_consumer`
(faust-streaming 0.15.3), the backoff `aiokafka.consumer.fetcher.Fetcher`'s `prefetch_backoff=0.1`, which
`AIOKafkaConsumer` never passes.

Where it may commit: Faust computes a partition's next commit from the offsets acknowledged since the
last one, and lets the lowest of them be one past the committed offset: when the record at the
committed offset itself was never acknowledged (dropped during a rebalance), it commits past it and
the record is never folded. `hold_commits_at_gaps` commits only from the committed offset on. Upstream:
faust-streaming/faust#606 ("Wrong offset commit in case of gaps", open; the fix proposed in #707 is not
released), after #312.

The wait at start: Faust's table manager sleeps a second before it starts the tables, a window in which
a table may still be declared. Every table of the worker is declared before the app starts, and every
start and restart of a worker waited that second with nothing to wait for (`PromptTableManager`).
Upstream: no issue reports it; the sleep is in `faust.tables.manager.TableManager.on_start`.
"""

from __future__ import annotations

from typing import Any

from faust.tables import TableManager
from faust.transport import consumer as consumer_module
from faust.transport.drivers import aiokafka as driver

from infra import kafka_codec
from infra.kafka import fetch_wait_ms
from infra.membership import leave_group_on_stop
from infra.settings import Settings
from processors.faust.feed import feed_folds
from processors.faust.inline_consumer import consume_inline

_original = driver.AIOKafkaConsumerThread._create_worker_consumer
MEMORY_PREFETCH_BACKOFF_S = 0.005


def tune_consumer(fetch_max_wait_ms: int, memory_broker: bool, whole_fetch_max_wait_ms: int | None) -> None:
    """`whole_fetch_max_wait_ms`, when given, is the wait of a fetch that names every assigned partition."""

    def create_worker_consumer(self: Any, transport: Any) -> Any:
        consumer = _original(self, transport)
        consumer._fetch_max_wait_ms = fetch_max_wait_ms
        start = consumer.start

        async def start_then_tune() -> None:
            await start()
            if memory_broker:
                consumer._fetcher._prefetch_backoff = MEMORY_PREFETCH_BACKOFF_S
            if whole_fetch_max_wait_ms is not None:
                tables = transport.app.tables
                wait_long_on_whole_fetches(consumer._fetcher, tables, fetch_max_wait_ms, whole_fetch_max_wait_ms)

        consumer.start = start_then_tune
        return consumer

    driver.AIOKafkaConsumerThread._create_worker_consumer = create_worker_consumer  # type: ignore[method-assign]


def wait_long_on_whole_fetches(fetcher: Any, tables: Any, short_ms: int, long_ms: int) -> None:
    """Before the fetcher decides its next fetches: the long wait if none can leave a partition out.

    Faust keeps the changelogs of the tables a worker leads paused once they are recovered; they are
    never fetched, so they do not count."""
    decide = fetcher._get_actions_per_node
    # By changelog topic: read in place, where the public `changelog_topics` builds a set per call.
    changelogs = tables._changelogs

    def actions_per_node(assignment: Any) -> Any:
        held = any(assignment.state_value(tp).paused and tp.topic not in changelogs for tp in assignment.tps)
        fetcher._fetch_max_wait_ms = short_ms if fetcher._records or held else long_ms
        return decide(assignment)

    fetcher._get_actions_per_node = actions_per_node


def read_offset(consumer: Any, tp: Any) -> int | None:
    """Faust's read offset of a partition: records it fetches below it are dropped, never handed over."""
    offset = consumer._read_offset.get(tp)
    return None if offset is None else int(offset)


def committed_offset(consumer: Any, tp: Any) -> int | None:
    """Faust's committed offset of a partition, as it sought there when the partition was assigned."""
    offset = consumer._committed_offset.get(tp)
    return None if offset is None else int(offset)


def hold_commits_at_gaps() -> None:
    original = consumer_module.Consumer._new_offset

    def new_offset(self: Any, tp: Any) -> Any:
        acked, committed = self._acked[tp], self._committed_offset[tp]
        if acked and committed is not None and min(acked) > committed and not self._gap[tp]:
            return None
        return original(self, tp)

    consumer_module.Consumer._new_offset = new_offset  # type: ignore[method-assign]


class PromptTableManager(TableManager):
    """Faust's table manager, starting the tables without its second's sleep first."""

    async def on_start(self) -> None:
        if not self.should_stop:
            await self._update_channels()
            await self.recovery.start()


def install(settings: Settings, folds: bool = True) -> None:
    """Every correction to Faust and aiokafka, before the process makes its app; the module docstrings
    give each one's reason. With `folds` False (the bench's Faust floor) Faust keeps its own consumer
    thread and streams, and only the consumer's waits, its commits and the group's leaving are corrected.
    """
    whole_wait_ms = None if settings.memory_broker else settings.fetch_max_wait_ms
    tune_consumer(fetch_wait_ms(settings, folding=True), settings.memory_broker, whole_wait_ms)
    hold_commits_at_gaps()
    leave_group_on_stop()
    if folds:
        consume_inline()
        feed_folds()
        kafka_codec.install()
