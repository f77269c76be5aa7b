"""Per-record isolation: a record a fold cannot handle goes to the `dead_letters` topic with the reason,
and is acknowledged like any other, so it neither crashes the worker nor holds its partition's commits.

Only errors the record itself causes are set aside (`POISON`: it does not decode, or folding it would
build a value over the bound), since they come back on every refold. Anything else, such as a broker or
table that is not ready yet, still stops the worker, whose restart folds the record again.

The dead letter names where the record was (topic, partition, offset) and why, never its value: the
record itself stays in its topic for whoever mends the fold and replays it. A client waiting for the
record's answer gets 422 `unprocessable` at once (docs/api.md, Errors) instead of waiting out the deadline.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
import orjson

from infra.clock import now_ms
from processors.metrics import WorkerMetrics
from processors.output.appender import Appender
from processors.output.replies import ReplyPath
from processors.state.tables import ValueTooLarge

log = logging.getLogger(__name__)
MAX_REASON = 200
POISON: tuple[type[Exception], ...] = (msgspec.DecodeError, orjson.JSONDecodeError, UnicodeDecodeError, ValueTooLarge)


class DeadLetters:
    def __init__(self, appender: Appender, metrics: WorkerMetrics, replies: ReplyPath) -> None:
        self.appender = appender
        self.metrics = metrics
        self.replies = replies

    async def put(self, name: str, record: Any, error: Exception, pending: list[Any]) -> None:
        """Set `record` of topic `name` aside; its offset is acknowledged once the dead letter is durable."""
        message = record.message
        reason = f"{type(error).__name__}: {error}"[:MAX_REASON]
        letter = {
            "kind": "dead_letter",
            "topic": message.topic,
            "partition": message.partition,
            "offset": message.offset,
            "reason": reason,
            "at": now_ms(),
        }
        log.error("a record no fold can handle was set aside", extra={k: letter[k] for k in ("topic", "offset")})
        self.metrics.dead_letters.labels(name).inc()
        pending.append(await self.appender.append("dead_letters", f"{message.topic}:{message.partition}", letter))
        cause = "value_too_large" if isinstance(error, ValueTooLarge) else "undecodable"
        await self.replies.reply(record, 422, {"error": "unprocessable", "reason": cause})
