"""The floor of a Faust worker on this broker: what folding costs before any domain rule runs.

python -m bench.faust_floor --broker URL --topic T --partitions N --tables K
    a Faust app built with the worker's own settings (processors.app.make_faust_app), one agent at
    concurrency 1 over the topic from offset 0, that decodes each record with orjson and writes it
    to K stock Faust tables (each write is one changelog record; the worker's coalesce theirs); prints
    {"tables", "records", "seconds", "per_s"} once it has folded every record present at start.
    The clock starts at the first record, so the group join (seconds) is not counted. --broker is the
    URL `callscreen run` recorded (kafka:// or, for the memory broker, tansu://); the topic must exist,
    and Faust creates its tables' changelog topics itself.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import faust
import orjson

from infra import event_loop
from infra.kafka import make_consumer, partitions
from infra.settings import Settings, load_settings
from processors.app import make_faust_app
from processors.faust import patches
from processors.worker import faust_worker


async def records_in(settings: Settings, topic: str) -> int:
    consumer = make_consumer(settings)
    await consumer.start()
    try:
        return sum((await consumer.end_offsets(await partitions(consumer, topic))).values())
    finally:
        await consumer.stop()


def floor_app(settings: Settings, topic: str, tables: int, total: int, datadir: Path) -> faust.App:
    patches.install(settings, folds=False)
    app = make_faust_app(settings, f"callscreen-bench-floor-{uuid.uuid4().hex[:8]}", datadir)
    source = app.topic(topic, key_type=bytes, value_type=bytes)
    stores = [
        app.Table(f"floor{i}", default=None, partitions=settings.partitions, key_type=bytes, value_type=bytes)
        for i in range(tables)
    ]
    clock: dict[str, float] = {}

    @app.agent(source, concurrency=1)
    async def fold(stream: Any) -> None:
        folded = 0
        async for event in stream.events():
            clock.setdefault("first", time.perf_counter())
            value = orjson.dumps(orjson.loads(event.value))
            for table in stores:
                table[event.key] = value
            folded += 1
            if folded == total:
                seconds = time.perf_counter() - clock["first"]
                result = {"tables": tables, "records": total, "seconds": round(seconds, 3)}
                result["per_s"] = round(total / max(seconds, 1e-9), 1)
                sys.stdout.buffer.write(orjson.dumps(result) + b"\n")
                sys.stdout.flush()
                # The measurement is printed; a clean Faust shutdown takes seconds and has nothing to keep
                # (os._exit skips the temporary directory's own clean-up).
                shutil.rmtree(datadir, ignore_errors=True)
                os._exit(0)

    return app


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.faust_floor")
    parser.add_argument("--broker", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, required=True, help="the topic's (tables must match it)")
    parser.add_argument("--tables", type=int, default=0)
    args = parser.parse_args()
    settings = Settings(broker=args.broker, partitions=args.partitions)
    # The worker's own event loop: the floor differs from the worker only in the work it leaves out.
    event_loop.install(load_settings().event_loop)
    total = asyncio.run(records_in(settings, args.topic))
    with tempfile.TemporaryDirectory(prefix="callscreen-floor-") as datadir:
        app = floor_app(settings, args.topic, args.tables, total, Path(datadir))
        faust_worker(app, "warning").execute_from_commandline()


if __name__ == "__main__":
    main()
