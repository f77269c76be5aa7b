"""What the edge needs of the log: append, ask (append and await the worker's answer), and the records
of the accounts, status and shadow topics as they arrive. `ingest.kafka_log` is the real one; the edge's own
tests run it on a log in memory (`callscreen.testing.MemoryLog`), whose worker is the pure folds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

Fold = Callable[[dict[str, Any]], None]


class LogUnavailable(Exception):
    """The log did not take the record: the edge answers 503 and nothing was acknowledged."""


class Log(Protocol):
    edge_id: str

    async def start(self, on_account: Fold, on_status: Fold, on_shadow: Fold) -> None:
        """Connect, and return once every account record written before now has been folded."""

    async def stop(self) -> None: ...

    def following(self) -> bool:
        """True while every topic follower still applies new records (a dead one means a frozen view)."""
        ...

    async def append(self, topic: str, key: str, value: bytes) -> None:
        """Append one record; returns once the log acknowledged it (LogUnavailable when it did not)."""

    async def ask(self, topic: str, key: str, value: bytes, partition: int | None) -> asyncio.Future[dict[str, Any]]:
        """Append a record that expects an answer; returns, once the log acknowledged it, the future
        of the worker's answer `{"status", "body"}`."""

    def forget(self, answer: asyncio.Future[dict[str, Any]]) -> None:
        """The edge stopped waiting for this answer."""
