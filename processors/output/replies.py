"""Answers to the edge that asked: over TCP to the address in the request's headers, else (or when
that fails) on the replies partition it named (docs/architecture.md, "The answer path")."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from typing import Any

from infra import frames
from processors.output.appender import Appender

log = logging.getLogger(__name__)
CONNECT_TIMEOUT_S = 1.0
# Edges' connections kept open. Each edge start listens on a new ephemeral port, so the addresses asked grow
# with every edge restart; the least recently used goes first (closed: at worst one reconnect).
WRITERS_KEEP = 64


class ReplyChannels:
    def __init__(self, token: str, keep: int = WRITERS_KEEP) -> None:
        self.token = token
        self.keep = keep
        # By address, the least recently used first.
        self.writers: OrderedDict[str, asyncio.StreamWriter] = OrderedDict()

    async def send(self, address: str, message: dict[str, Any]) -> bool:
        """Write one answer to the edge at `address`; False when it cannot be reached (use the topic)."""
        try:
            writer = self.writers.get(address)
            if writer is None or writer.is_closing():
                writer = await self._connect(address)
            else:
                self.writers.move_to_end(address)
            writer.write(frames.encode(message))
            await writer.drain()
            return True
        except (OSError, TimeoutError, ValueError) as exc:
            log.info("edge not reachable directly; answering on the replies topic", extra={"error": type(exc).__name__})
            stale = self.writers.pop(address, None)
            if stale is not None:
                stale.close()
            return False

    async def _connect(self, address: str) -> asyncio.StreamWriter:
        host, port = address.rsplit(":", 1)
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), CONNECT_TIMEOUT_S)
        writer.write(frames.encode(frames.hello(self.token)))
        self.writers[address] = writer
        self.writers.move_to_end(address)
        while len(self.writers) > self.keep:
            _, oldest = self.writers.popitem(last=False)
            oldest.close()
        return writer


class ReplyPath:
    def __init__(self, appender: Appender, token: str) -> None:
        self.appender = appender
        self.channels = ReplyChannels(token)

    async def reply(self, event: Any, status: int, body: Any) -> None:
        """Answer the edge that sent `event`; records without a correlation id are replays or ticks."""
        headers = dict(event.headers or {})
        partition, corr, reply_to = headers.get("reply-partition"), headers.get("corr"), headers.get("reply-to")
        if partition is None or corr is None:
            return
        answer = {"status": status, "body": body}
        if reply_to is not None and await self.channels.send(reply_to.decode(), {"corr": corr.decode(), **answer}):
            return
        await self.appender.append("replies", corr.decode(), answer, partition=int(partition))
