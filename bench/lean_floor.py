"""The worker's fold without Faust: what the same work costs with Kafka, RocksDB and the domain alone.

python -m bench.lean_floor --broker URL --topic T --partitions N
    reads the whole topic (a copy of a fold round's backlog) up to its end offsets at start with a
    plain aiokafka consumer (`getmany`, the service's consumer settings) and folds each record as the
    worker does: the call's row read from and written to RocksDB, the feature view in RocksDB
    (`processors.state.rocks`, the worker's budget and options), the listing index and the sweep
    entry, each fact applied to the view and folded by the number's detectors, and appended. Each
    fetched batch's changed rows are then appended once, as the worker's write-behind flush does, and
    the batch's appends awaited. The facts and rows go to a topic of the floor's own. Prints
    {"records", "seconds", "cpu_seconds", "per_s", "cpu_us_per_record"} once it has folded every
    record present at start.

Left out against the worker: Faust's consumer and conductor, the detectors' own round trip through the
decisions topic, the answers to the edge, the facts mirror and the hot-table horizon. It was written as
the bound of a worker without Faust's per-record path; the worker's folds now read feeds instead of
Faust's streams (processors/faust/feed.py), and docs/benchmarks.md compares the two in each run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec
from rocksdict import Rdict

from bench.domain_floor import rates
from bench.service import backlog, create_topic
from domain import calls, detectors, features, index, keys
from domain.calls import Stored
from domain.detectors import Echo, NumberWindow
from domain.events import decode_event
from domain.features import FeatureView
from infra import event_loop, kafka_codec
from infra.kafka import make_consumer, make_producer, partition_for
from infra.settings import Settings, load_settings
from processors.state.rocks import RocksBudget, RocksStore


class Rows:
    """Msgspec rows in a RocksDB database per table and partition; changed keys kept for one append each."""

    def __init__(self, root: Path, budget: RocksBudget) -> None:
        self.root = root
        self.budget = budget
        self.dbs: dict[tuple[str, int], Rdict] = {}
        self.dirty: dict[tuple[str, int, bytes], bytes | None] = {}

    def db(self, table: str, partition: int) -> Rdict:
        if (table, partition) not in self.dbs:
            path = self.root / f"{table}-{partition}"
            path.mkdir(parents=True)
            self.dbs[(table, partition)] = self.budget.open(path)
        return self.dbs[(table, partition)]

    def get(self, table: str, partition: int, key: str, kind: Any) -> Any:
        raw = self.db(table, partition).get(key.encode())
        return None if raw is None else msgspec.json.decode(raw, type=kind)

    def put(self, table: str, partition: int, key: str, value: Any) -> None:
        raw = msgspec.json.encode(value)
        self.db(table, partition).put(key.encode(), raw)
        self.dirty[(table, partition, key.encode())] = raw

    def delete(self, table: str, partition: int, key: str) -> None:
        self.db(table, partition).delete(key.encode())
        self.dirty[(table, partition, key.encode())] = None

    def close(self) -> None:
        for db in self.dbs.values():
            db.close()


class LeanFold:
    def __init__(self, settings: Settings, root: Path) -> None:
        self.settings = settings
        self.rules = settings.rules
        budget = RocksBudget(settings.rocksdb_memory_mb)
        self.rows = Rows(root / "tables", budget)
        self.store = RocksStore(root / "features", budget)
        self.view = FeatureView(self.store, self.rules.scoring)

    def fold(self, value: bytes, key: str, partition: int) -> list[tuple[str, bytes]]:
        """One event as the worker folds it; the (key, fact) pairs to append."""
        event = decode_event(value)
        state = self.rows.get("calls", partition, key, Stored)
        outcome = calls.fold(state, event, features.context(self.view, state, event, self.rules), self.rules)
        if outcome.state is not None:
            self.rows.put("calls", partition, key, outcome.state)
        if outcome.listed is not None:
            account = keys.split_call(key)[0]

            def reader(index_key: str) -> Any:
                return self.rows.get("call_index", partition, index_key, Any)

            for index_key, row in index.additions(reader, "calls", account, partition, outcome.listed).items():
                self.rows.put("call_index", partition, index_key, row)
        due = None if outcome.due is None else outcome.due.at
        if self.rows.get("sweeps", partition, key, int) != due:
            if due is None:
                self.rows.delete("sweeps", partition, key)
            else:
                self.rows.put("sweeps", partition, key, due)
        appended = []
        for fact in outcome.facts:
            self.view.apply(fact)
            number_key = keys.number(fact.account_id, fact.number)
            self.detect(number_key, fact)
            appended.append((number_key, msgspec.json.encode(fact)))
        return appended

    def detect(self, number_key: str, fact: Any) -> None:
        partition = partition_for(number_key, self.settings.partitions)
        window = self.rows.get("number_windows", partition, number_key, NumberWindow) or NumberWindow()
        observed = detectors.observe(
            window,
            fact,
            self.rules.detectors,
            self.rules.scoring,
            lambda i: self.rows.get("number_windows", partition, keys.echo(number_key, i), Echo),
        )
        if observed.window is not window:
            self.rows.put("number_windows", partition, number_key, observed.window)


async def run(settings: Settings, topic: str, root: Path) -> dict[str, Any]:
    out_topic = f"{topic}.lean-floor"
    await create_topic(settings, out_topic, settings.partitions)
    consumer = make_consumer(settings)
    producer = make_producer(settings)
    await consumer.start()
    await producer.start()
    lean = LeanFold(settings, root)
    try:
        folded = 0
        clock: tuple[float, float] | None = None
        async for batch in backlog(consumer, topic, {}):
            if clock is None:
                # From the first record on: the partitions' assignment and first fetch are not counted.
                clock = (time.perf_counter(), time.process_time())
            acks = []
            for tp, records in batch.items():
                for record in records:
                    for number_key, fact in lean.fold(record.value, record.key.decode(), tp.partition):
                        acks.append(await producer.send(out_topic, fact, key=number_key.encode()))
                    folded += 1
            lean.store.write_pending()
            dirty, lean.rows.dirty = lean.rows.dirty, {}
            for (_, partition, key), row in dirty.items():
                acks.append(await producer.send(out_topic, row, key=key, partition=partition))
            await asyncio.gather(*acks)
        assert clock is not None
        return rates(folded, time.perf_counter() - clock[0], time.process_time() - clock[1])
    finally:
        await consumer.stop()
        await producer.stop()
        lean.rows.close()
        lean.view.store.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.lean_floor")
    parser.add_argument("--broker", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, required=True)
    args = parser.parse_args()
    settings = Settings(broker=args.broker, partitions=args.partitions)
    # The worker's own event loop: the floor differs from the worker only in the work it leaves out.
    event_loop.install(load_settings().event_loop)
    kafka_codec.install()
    with tempfile.TemporaryDirectory(prefix="callscreen-lean-") as root:
        print(json.dumps(asyncio.run(run(settings, args.topic, Path(root)))))


if __name__ == "__main__":
    main()
