"""The floors the service is compared with, on the same broker.

--broker is the URL the service's `callscreen run` recorded: kafka://H:P for Apache Kafka, tansu://H:P for
the memory broker (its clients then get the service's Tansu workarounds). The topic must exist.

python -m bench.baselines serve --broker URL --topic T --port P
    a bare aiohttp server: its handler parses the JSON body and appends it with an aiokafka
    producer configured exactly as the service's (callscreen.kafka.make_producer: acks=all, linger 0;
    idempotent on Kafka, one record per batch on Tansu), waiting for the ack, on the edge's event loop
    (setting `event_loop`). Nothing else.
python -m bench.baselines consume --broker URL --topic T
    a bare group-less aiokafka consumer (the service's consumer settings) that reads every record
    of the topic from offset 0 to the end offsets seen at start, decoding each value with orjson;
    prints {"records", "seconds", "per_s"}.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

import orjson
from aiohttp import web

from infra import event_loop
from infra.kafka import make_consumer, make_producer, partitions
from infra.settings import Settings, load_settings


async def serve(broker: str, topic: str, host: str, port: int) -> None:
    producer = make_producer(Settings(broker=broker))
    await producer.start()

    async def append(request: web.Request) -> web.Response:
        raw = await request.read()
        body = orjson.loads(raw)
        await producer.send_and_wait(topic, raw, key=str(body.get("call_id", "")).encode())
        return web.Response(body=b'{"ok":true}', content_type="application/json")

    async def health(request: web.Request) -> web.Response:
        return web.Response(body=b'{"status":"ok"}', content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/events", append)
    app.router.add_get("/healthz", health)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    print(f"bare ready on http://{host}:{port}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
        await producer.stop()


async def consume(broker: str, topic: str) -> dict[str, float]:
    consumer = make_consumer(Settings(broker=broker))
    await consumer.start()
    try:
        parts = await partitions(consumer, topic)
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        ends = await consumer.end_offsets(parts)
        pending = {tp for tp in parts if ends[tp] > 0}
        records = 0
        started = time.perf_counter()
        while pending:
            for tp, messages in (await consumer.getmany(*pending, timeout_ms=500)).items():
                for message in messages:
                    orjson.loads(message.value)
                records += len(messages)
                if messages and messages[-1].offset + 1 >= ends[tp]:
                    pending.discard(tp)
        seconds = time.perf_counter() - started
        return {"records": records, "seconds": round(seconds, 3), "per_s": round(records / max(seconds, 1e-9), 1)}
    finally:
        await consumer.stop()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.baselines")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--broker", required=True)
    s.add_argument("--topic", required=True)
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, required=True)
    c = sub.add_parser("consume")
    c.add_argument("--broker", required=True)
    c.add_argument("--topic", required=True)
    args = parser.parse_args()
    # The service's own event loop: a floor differs from the service only in the work it leaves out.
    event_loop.install(load_settings().event_loop)
    if args.command == "serve":
        asyncio.run(serve(args.broker, args.topic, args.host, args.port))
    else:
        sys.stdout.buffer.write(orjson.dumps(asyncio.run(consume(args.broker, args.topic))) + b"\n")


if __name__ == "__main__":
    main()
