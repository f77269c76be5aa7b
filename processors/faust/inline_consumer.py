"""Faust's Kafka consumer run on the worker's own event loop instead of a thread of its own.

Faust runs aiokafka in a second thread and hands every fetch, seek and commit across with a method
queue and a cross-thread wake-up. In this worker that hand-off was a large part of each record's
cost: the two threads took turns at the GIL, and each fetch, each result and each rebalance callback
woke the other loop (docs/decisions/0005-faust-consumer-on-the-workers-loop.md). Here the "thread" is a plain service
on the app's loop: the same aiokafka consumer, the same calls, awaited directly. Faust's own
reason for the thread, a main loop too busy to heartbeat, does not hold here: aiokafka heartbeats
from a task of its own, and a fold holds the loop for milliseconds against a 10 s session timeout.

Upstream: the thread came with robinhood/faust#231 ("Stability: Move Kafka consumer to separate thread"), so
that heartbeats outlive a blocking agent; faust-streaming/faust#175 describes races through its hand-off.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Coroutine, Generator, Iterable, Mapping
from typing import Any

from faust.transport.consumer import CONSUMER_FETCHING
from faust.transport.drivers import aiokafka as driver
from mode import Service
from mode.services import WaitResults

from processors.faust.feed import Feed


class InlineConsumerThread(driver.AIOKafkaConsumerThread):
    """Faust's consumer service without its thread: its loop is the app's loop."""

    def __init__(self, consumer: Any, **kwargs: Any) -> None:
        loop = kwargs.pop("loop")
        super().__init__(consumer, loop=loop, thread_loop=loop, **kwargs)

    # Back to a plain service's start and stop: no thread to start, wait for or join, and no thread
    # to signal that it has shut down (a stop would wait a minute for it).
    wait_for_shutdown = False
    start = Service.start
    maybe_start = Service.maybe_start
    stop = Service.stop
    set_shutdown = Service.set_shutdown
    _new_shutdown_event = Service._new_shutdown_event
    _stopped_set = Service._stopped_set
    _stop_children = Service._stop_children
    _stop_futures = Service._stop_futures
    _stop_exit_stacks = Service._stop_exit_stacks

    async def crash(self, exc: BaseException) -> None:
        await Service.crash(self, exc)

    async def on_stop(self) -> None:
        await self.on_thread_stop()

    async def call_thread(self, fun: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        # Like Faust's method queue, it takes plain functions as well as coroutine functions.
        result = fun(*args, **kwargs)
        return await result if inspect.isawaitable(result) else result

    async def cast_thread(self, fun: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        await self.call_thread(fun, *args, **kwargs)

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self.consumer.on_partitions_revoked(revoked)

    async def on_partitions_assigned(self, assigned: Any, generation_id: int = 0) -> None:
        await self.consumer.on_partitions_assigned(assigned, generation_id)


class InlineConsumer(driver.Consumer):
    """Faust's aiokafka consumer, with `InlineConsumerThread` in place of its thread."""

    def _new_consumer_thread(self) -> driver.AIOKafkaConsumerThread:
        return InlineConsumerThread(self, loop=self.loop, beacon=self.beacon)

    def pause_partitions(self, tps: Iterable[Any]) -> None:
        """Faust pauses a partition in its own bookkeeping only; a table's changelog is paused in aiokafka too.

        aiokafka goes on fetching what only Faust paused. A changelog partition of a table this worker
        writes stays paused once its table is recovered, so the first records this worker writes to it
        are fetched and never taken, and aiokafka sends no fetch to a broker while a record it fetched
        from it is less than its prefetch backoff (100 ms) old and not yet taken: every partition's next
        record waited up to 100 ms, once for each changelog partition written for the first time
        (docs/decisions/0014-changelogs-paused-in-aiokafka.md).
        """
        tps = list(tps)
        super().pause_partitions(tps)
        self._pause_changelogs_in_aiokafka(tps, True)

    def resume_partitions(self, tps: Iterable[Any]) -> None:
        tps = list(tps)
        super().resume_partitions(tps)
        self._pause_changelogs_in_aiokafka(tps, False)

    def verify_event_path(self, now: float, tp: Any) -> None:
        # Faust's livelock check reports an assigned partition no fetch has named for a while as a stall;
        # a changelog paused in aiokafka (above) is named by none, by design.
        if self._is_changelog_tp(tp) and tp in self._paused_partitions:
            return
        super().verify_event_path(now, tp)

    def _pause_changelogs_in_aiokafka(self, tps: list[Any], paused: bool) -> None:
        consumer = self._thread._consumer
        if consumer is None:
            return
        assigned = consumer.assignment()
        # Only what is still assigned: a rebalance may have moved a partition since Faust decided.
        changelogs = [
            self._new_topicpartition(tp.topic, tp.partition)
            for tp in tps
            if self._is_changelog_tp(tp) and tp in assigned
        ]
        if changelogs:
            (consumer.pause if paused else consumer.resume)(*changelogs)

    async def wait_first(self, *coros: Any, timeout: Any = None) -> WaitResults:
        """Faust hands each record to its agents as `wait_first(deliver, suspend_flow.wait())`.

        Mode's `wait_first` makes four tasks for it (the delivery, the flow, stopped, crashed) and cancels
        three: per record, more than the delivery itself, which only queues the record on its agent's
        buffer (docs/decisions/0008-records-handed-over-without-tasks.md). Here the delivery's first step runs at
        once; only a delivery that has to wait (a full buffer) goes the way of tasks, from where it stopped.
        """
        deliver, *others = coros
        if not inspect.iscoroutine(deliver) or self.suspend_flow.is_set() or self.should_stop or self._crashed.is_set():
            return await super().wait_first(*coros, timeout=timeout)
        try:
            waiting_on = deliver.send(None)
        except StopIteration as delivered:
            for other in others:
                if inspect.iscoroutine(other):
                    other.close()
            return WaitResults([deliver], [delivered.value], False)
        return await super().wait_first(_Resumed(deliver, waiting_on), *others, timeout=timeout)

    async def _drain_messages(self, fetcher: Any) -> None:
        """Faust's loop from fetches to agents, with a fetch's records of a topic that has a feed handed to
        it a partition's batch at a time (`_hand_over`); the records of every other topic go Faust's way.

        Faust takes each record through a round-robin scheduler, a flow, generation and partition check,
        the partition's high-water mark, and `wait_first` on the conductor's callback and the flow's
        suspension: a tenth of the worker's CPU while it folds a backlog, for a hand-over to a feed that
        never waits (docs/decisions/0008-records-handed-over-without-tasks.md)."""
        feeds: dict[str, Feed] = getattr(self.app.topics, "feeds", {})
        stopped, fetcher_stopped = self._stopped.is_set, fetcher._stopped.is_set
        try:
            while not (stopped() or fetcher_stopped()):
                self.diag.set_flag(CONSUMER_FETCHING)
                records, active = await self._wait_next_records(1.0)
                # As Faust's: a fetch that returns at once must not keep the loop from the folds.
                await self.sleep(0)
                if records is not None and not self.should_stop:
                    await self._hand_over(records, active, feeds)
                self.diag.unset_flag(CONSUMER_FETCHING)
        except self.consumer_stopped_errors:
            if self.transport.app.should_stop:
                return
            raise
        except asyncio.CancelledError:
            if self.transport.app.should_stop:
                return
            raise
        finally:
            self.diag.unset_flag(CONSUMER_FETCHING)

    async def _hand_over(
        self, records: Mapping[Any, list[Any]], active: set[Any] | None, feeds: dict[str, Feed]
    ) -> None:
        """One fetch's records, partition by partition, with Faust's checks (`Consumer.getmany`)."""
        generation = self.app.consumer_generation_id
        if not self.flow_active:
            # A rebalance began after the fetch: Faust goes back to the committed offsets.
            try:
                await self.perform_seek()
            except Exception as exc:
                self.log.warning(f"exception performing seek when flow not active {exc}")
            return
        for tp, batch in records.items():
            if not self.flow_active or self.app.consumer_generation_id != generation:
                return
            if active is not None and tp not in active and tp not in self._buffered_partitions:
                continue
            self.app.monitor.track_tp_end_offset(tp, self.highwater(tp))
            feed = feeds.get(tp.topic)
            if feed is None:
                await self._deliver_each(tp, batch, generation)
                continue
            messages = await self._in_order(tp, batch)
            if messages:
                await self._commit_if_due()
                await feed.deliver(messages)

    async def _in_order(self, tp: Any, batch: list[Any]) -> list[Any]:
        """The batch as Faust's messages, less those behind the partition's read offset (fetched before a
        seek). Nothing awaits between taking them and the hand-over, so the read offset moves first."""
        to_message = self._to_message
        messages = []
        for record in batch:
            if await self._next_in_order(tp, record.offset, record.topic):
                messages.append(to_message(tp, record))
                self._read_offset[tp] = record.offset
        return messages

    async def _deliver_each(self, tp: Any, batch: list[Any], generation: int) -> None:
        """Faust's own hand-over, record by record, through the conductor's callback."""
        for record in batch:
            if not self.flow_active or self.app.consumer_generation_id != generation:
                return
            if await self._next_in_order(tp, record.offset, record.topic):
                await self._commit_if_due()
                await self.wait_first(self.callback(self._to_message(tp, record)), self.suspend_flow.wait())
                self._read_offset[tp] = record.offset

    async def _next_in_order(self, tp: Any, offset: int, topic: str) -> bool:
        """False for a record behind the partition's read offset; a gap before it noted as Faust notes it
        (`_add_gap`: a compacted topic's missing offsets count as acknowledged)."""
        read = self._read_offset[tp]
        if read is not None and offset < read:
            return False
        if read and offset - read > 1 and self.app.topics.acks_enabled_for(topic):
            await self._add_gap(tp, read + 1, offset)
        return True

    async def _commit_if_due(self) -> None:
        if self._commit_every is not None and self._n_acked >= self._commit_every:
            self._n_acked = 0
            await self.commit()


def consume_inline() -> None:
    """Every Faust app made after this consumes on its own loop (the worker's, not the bench's floor)."""
    driver.Transport.Consumer = InlineConsumer


class _Resumed(Coroutine[Any, Any, Any]):
    """The rest of `coro`, which has run up to yielding `waiting_on`, for a task to finish.

    A class, not a generator: a task cancelled before its first step throws into it, and a generator
    that has not started would raise that at its first line without passing it to `coro`.
    """

    def __init__(self, coro: Coroutine[Any, Any, Any], waiting_on: Any) -> None:
        self._coro = coro
        self._waiting_on = waiting_on
        self._handed_over = False

    def send(self, value: Any) -> Any:
        if not self._handed_over:
            # The task's first step: what the coroutine waits on is now the task's to wait on.
            self._handed_over = True
            return self._waiting_on
        return self._coro.send(value)

    def throw(self, *thrown: Any) -> Any:
        self._handed_over = True
        return self._coro.throw(*thrown)

    def close(self) -> None:
        self._coro.close()

    def __next__(self) -> Any:
        return self.send(None)

    def __await__(self) -> Generator[Any, None, Any]:
        return self  # type: ignore[return-value]
