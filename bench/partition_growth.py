"""How a broker's fetch slows as one partition grows: the bound of a long run on the memory broker.

python -m bench.partition_growth --broker URL [--sizes 1000,3000,6000,10000]
    appends records of 300 bytes with the service's producer settings (on the memory broker,
    tansu://H:P, single-record batches) to a fresh one-partition topic until it holds each size in
    turn, then reads it from offset 0 with the service's consumer settings for at most 5 s; prints
    one JSON object per size: {"records", "read", "seconds", "per_s", "per_fetch"} (records per
    non-empty fetch).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from typing import Any

import orjson
from aiokafka import TopicPartition

from bench.service import create_topic
from infra.kafka import make_consumer, make_producer
from infra.settings import Settings

READ_LIMIT_S = 5.0
VALUE = b"x" * 300


async def read_from_start(settings: Settings, tp: TopicPartition, records: int) -> dict[str, Any]:
    consumer = make_consumer(settings)
    await consumer.start()
    try:
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        read = fetches = 0
        started = time.perf_counter()
        while read < records and time.perf_counter() - started < READ_LIMIT_S:
            for messages in (await consumer.getmany(tp, timeout_ms=200)).values():
                read += len(messages)
                fetches += 1
        seconds = time.perf_counter() - started
        return {
            "records": records,
            "read": read,
            "seconds": round(seconds, 3),
            "per_s": round(read / max(seconds, 1e-9), 1),
            "per_fetch": round(read / max(fetches, 1), 1),
        }
    finally:
        await consumer.stop()


async def measure(broker: str, sizes: list[int]) -> list[dict[str, Any]]:
    settings = Settings(broker=broker)
    topic = f"callscreen-bench.growth-{uuid.uuid4().hex[:8]}"
    await create_topic(settings, topic, 1)
    tp = TopicPartition(topic, 0)
    producer = make_producer(settings)
    await producer.start()
    rows: list[dict[str, Any]] = []
    held = 0
    try:
        for size in sorted(sizes):
            acks = [await producer.send(topic, VALUE, partition=0) for _ in range(size - held)]
            await asyncio.gather(*acks)
            held = size
            row = await read_from_start(settings, tp, size)
            rows.append(row)
            print(orjson.dumps(row).decode(), flush=True)
    finally:
        await producer.stop()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.partition_growth")
    parser.add_argument("--broker", required=True)
    parser.add_argument("--sizes", default="1000,3000,6000,10000")
    args = parser.parse_args()
    asyncio.run(measure(args.broker, [int(s) for s in args.sizes.split(",")]))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
