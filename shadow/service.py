"""The shadow role: runs each `shadow.requested` on the shadow topic (decisions section 17) and writes its
progress and its result there, and nowhere else.

A run reads the events topic, and the facts of the decisions topic that no fold of the events makes (a
number's tick, a removed number), from the beginning up to the offsets the broker gives for the run's
`until` (`offsets_for_times`), all partitions merged in the order the records were appended, and folds
them through `domain.shadow.ShadowRun`: the same pure folds as the workers, in memory, twice. Everything
else an account's record on the accounts topic changes reaches the folds stamped on its events (plan,
trusted list, policy), so the accounts topic is not read.

It has a consumer of its own (group `<prefix>.shadow-run`, assigned, never committing: each run starts
from the beginning) and a producer that writes only the shadow topic: no alert, block, delivery, allowance
or answer of the live service is touched. The process lowers its own CPU priority, so on shared cores the
workers' answers come first and a run takes what is left, and at most `shadow_cpu_share` of a core (half
by default). Up to `shadow_concurrent_runs` runs fold at once, each of its own account (the edge allows
one per account), and share that one budget, so one account's long run never holds another account's
behind it; a run not done when the role stopped is run again from the start when it comes back.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import signal
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable

import msgspec
import orjson
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from domain.events import decode_event
from domain.facts import NumberRemoved, NumberTick, decode_fact
from domain.shadow import DONE, PROGRESS, REQUESTED, RESULT, Request, ShadowRun, chunks, request_of
from domain.times import format_ms
from infra.clock import now_ms
from infra.follow import TopicFollower
from infra.heap import freeze_startup_objects
from infra.kafka import make_consumer, make_producer, partition_for, partitions
from infra.settings import Settings

log = logging.getLogger("callscreen.shadow")

PROGRESS_EVERY_S = 1.0
# A run folds for this long, then waits out what its CPU share leaves of the slice.
SLICE_S = 0.02
# Flipped calls per `shadow.result` record: about 250 bytes each, far under the broker's 1 MiB a record.
FLIPPED_PER_RECORD = 1000
# What a decisions record must name to be read: the facts a replay of the events cannot make itself.
LOGGED_FACTS = (b'"number.tick"', b'"number.removed"')
# How far below the workers the role runs (os.nice).
NICENESS = 10
# Records one fetch hands over at most: what the merge buffers stays a few megabytes.
FETCH_RECORDS = 2000


class Shadow:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.topic = settings.topic("shadow")
        self.producer = make_producer(settings)
        self.asked: dict[str, Request] = {}
        self.done: set[str] = set()
        self.waiting = asyncio.Event()
        self.running: dict[str, asyncio.Task[bool]] = {}
        # One budget for every run under way: together they take at most the share.
        self.throttle = Throttle(settings.shadow_cpu_share)
        self.follower = TopicFollower(settings, self.topic, self.fold)

    def fold(self, record: dict[str, object]) -> None:
        if record.get("kind") == REQUESTED:
            self.asked[str(record["id"])] = request_of(record)
            self.waiting.set()
        elif record.get("kind") == DONE:
            self.done.add(str(record["id"]))

    def next_requests(self, room: int) -> list[Request]:
        """Up to `room` runs not done and not under way, in the order they were asked for."""
        waiting = (r for run_id, r in self.asked.items() if run_id not in self.done and run_id not in self.running)
        return list(itertools.islice(waiting, max(0, room)))

    async def run(self, stop: asyncio.Event) -> None:
        await self.producer.start()
        await self.follower.start()
        try:
            await self.follower.caught_up()
            while not stop.is_set():
                # Cleared first: a request folded from here on wakes the wait below.
                self.waiting.clear()
                for request in self.next_requests(self.settings.shadow_concurrent_runs - len(self.running)):
                    self.running[request.id] = asyncio.create_task(self.shadow(request, stop))
                waits = [*self.running.values(), asyncio.ensure_future(self.waiting.wait())]
                await asyncio.wait(waits, timeout=1.0, return_when=asyncio.FIRST_COMPLETED)
                waits[-1].cancel()
                for run_id, task in list(self.running.items()):
                    if task.done():
                        del self.running[run_id]
                        if task.result():
                            self.done.add(run_id)
        finally:
            for task in self.running.values():
                task.cancel()
            await asyncio.gather(*self.running.values(), return_exceptions=True)
            await self.follower.stop()
            await self.producer.stop()

    async def shadow(self, request: Request, stop: asyncio.Event) -> bool:
        """Run one request to its end and write its result; False when stopped first (it runs again)."""
        started = time.monotonic()
        run = ShadowRun(request, self.settings.rules, lambda key: partition_for(key, self.settings.partitions))
        error: str | None = None
        try:
            reader = LogReader(self.settings, request.until)
            await self.send(request, PROGRESS, progress=0.0, calls=0)
            last = time.monotonic()
            async for record in reader.records():
                if stop.is_set():
                    return False
                await self.throttle.turn()
                fold_record(run, record, self.settings.topic("events"))
                self.throttle.spent()
                if time.monotonic() - last >= PROGRESS_EVERY_S:
                    last = time.monotonic()
                    await self.send(request, PROGRESS, progress=reader.progress(), calls=run.calls())
        except Exception as exc:
            # A run that cannot finish still ends, so its account may ask for another.
            log.exception("shadow run failed", extra={"id": request.id})
            error = type(exc).__name__
        if error is None:
            tally = run.tally()
            summary = tally.summary()
            parts = chunks(tally.all_flipped(), FLIPPED_PER_RECORD)
            for number, part in enumerate(parts):
                # The first part carries the summary; the others only their share of the flipped calls.
                head = {"summary": summary} if number == 0 else {}
                await self.send(request, RESULT, part=number, **head, flipped=part)
            await self.send(request, DONE, parts=len(parts))
        else:
            await self.send(request, DONE, parts=0, error=error)
        seconds = time.monotonic() - started
        log.info(
            "shadow run done",
            extra={"id": request.id, "calls": run.calls(), "seconds": round(seconds, 2), "error": error},
        )
        return True

    async def send(self, request: Request, kind: str, **fields: object) -> None:
        record = {"kind": kind, "id": request.id, "account_id": request.account_id, **fields, "at": format_ms(now_ms())}
        await self.producer.send_and_wait(self.topic, orjson.dumps(record), key=request.account_id.encode())


class Throttle:
    """Holds the runs under way together to `share` of the wall clock: each slice of work done owes a rest in
    proportion to it, and every run waits out the rest before its next record, whichever run worked it."""

    def __init__(
        self,
        share: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.share = min(1.0, max(0.01, share))
        self.clock = clock
        self.sleep = sleep
        self.started = clock()
        self.resume_at = 0.0

    async def turn(self) -> None:
        """Once the runs' rest is over (at once when none is owed)."""
        while (rest := self.resume_at - self.clock()) > 0:
            await self.sleep(rest)
        if self.started < self.resume_at:
            self.started = self.clock()

    def spent(self) -> None:
        """A record folded: past a slice of work since the last rest, the rest it owes starts now."""
        now = self.clock()
        worked = now - self.started
        if worked >= SLICE_S:
            self.resume_at = now + worked * (1 - self.share) / self.share
            self.started = self.resume_at


def fold_record(run: ShadowRun, record: ConsumerRecord[bytes, bytes], events_topic: str) -> None:
    """One record of the log into the run; a record no fold can take is skipped, as a dead letter was live."""
    value = record.value
    if value is None:
        return
    try:
        if record.topic == events_topic:
            run.fold(decode_event(value), record.key.decode() if record.key is not None else None)
        elif any(kind in value for kind in LOGGED_FACTS):
            fact = decode_fact(value)
            if isinstance(fact, NumberTick | NumberRemoved):
                run.apply(fact)
    except (msgspec.DecodeError, msgspec.ValidationError):
        log.warning("skipped a record that does not decode", extra={"topic": record.topic, "offset": record.offset})


class LogReader:
    """The events and decisions topics from the beginning to the offsets of `until`, in append order."""

    def __init__(self, settings: Settings, until: int) -> None:
        self.settings = settings
        self.until = until
        self.starts: dict[TopicPartition, int] = {}
        self.ends: dict[TopicPartition, int] = {}
        self.read: dict[TopicPartition, int] = {}

    def progress(self) -> float:
        total = sum(self.ends[tp] - self.starts[tp] for tp in self.ends)
        done = sum(self.read.get(tp, self.starts[tp]) - self.starts[tp] for tp in self.ends)
        return 1.0 if total <= 0 else round(min(1.0, done / total), 4)

    async def records(self) -> AsyncIterator[ConsumerRecord[bytes, bytes]]:
        consumer = make_consumer(self.settings, group_id=f"{self.settings.topic_prefix}.shadow-run")
        await consumer.start()
        try:
            assigned = [
                *await partitions(consumer, self.settings.topic("events")),
                *await partitions(consumer, self.settings.topic("decisions")),
            ]
            consumer.assign(assigned)
            await self._bounds(consumer, assigned)
            async for record in merged(consumer, self.starts, self.ends, self.read):
                yield record
        finally:
            await consumer.stop()

    async def _bounds(self, consumer: AIOKafkaConsumer, assigned: list[TopicPartition]) -> None:
        self.starts = dict(await consumer.beginning_offsets(assigned))
        latest = await consumer.end_offsets(assigned)
        at = await consumer.offsets_for_times(dict.fromkeys(assigned, self.until))
        # No record at or after `until` yet: everything the partition holds now is before it.
        self.ends = {tp: latest[tp] if at.get(tp) is None else at[tp].offset for tp in assigned}
        for tp in assigned:
            consumer.seek(tp, self.starts[tp])


async def merged(
    consumer: AIOKafkaConsumer,
    starts: dict[TopicPartition, int],
    ends: dict[TopicPartition, int],
    read: dict[TopicPartition, int],
) -> AsyncIterator[ConsumerRecord[bytes, bytes]]:
    """The partitions' records below their ends, the earliest appended first (by the record's timestamp):
    the order the workers met them in, near enough, where each partition alone keeps no order with another."""
    buffers: dict[TopicPartition, deque[ConsumerRecord[bytes, bytes]]] = {tp: deque() for tp in ends}
    open_ = {tp for tp in ends if starts[tp] < ends[tp]}
    for tp in set(ends) - open_:
        consumer.pause(tp)
    while True:
        empty = [tp for tp in open_ if not buffers[tp]]
        while empty:
            batches = await consumer.getmany(*empty, timeout_ms=500, max_records=FETCH_RECORDS)
            for tp, messages in batches.items():
                for message in messages:
                    if message.offset < ends[tp]:
                        buffers[tp].append(message)
            for tp in list(open_):
                if await consumer.position(tp) >= ends[tp]:
                    open_.discard(tp)
                    consumer.pause(tp)
            empty = [tp for tp in open_ if not buffers[tp]]
        ready = [tp for tp in buffers if buffers[tp]]
        if not ready:
            return
        tp = min(ready, key=lambda t: (buffers[t][0].timestamp, t.topic, t.partition))
        record = buffers[tp].popleft()
        read[tp] = record.offset + 1
        yield record


async def run_shadow(settings: Settings) -> None:
    os.nice(NICENESS)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    shadow = Shadow(settings)
    freeze_startup_objects()
    await shadow.run(stop)
