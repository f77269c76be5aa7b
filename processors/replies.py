"""A worker's TCP connections to the edges that ask it questions, one per edge address."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from callscreen import frames

log = logging.getLogger(__name__)
CONNECT_TIMEOUT_S = 1.0


class ReplyChannels:
    def __init__(self) -> None:
        self.writers: dict[str, asyncio.StreamWriter] = {}

    async def send(self, address: str, message: dict[str, Any]) -> bool:
        """Write one answer to the edge at `address`; False when it cannot be reached (use the topic)."""
        try:
            writer = self.writers.get(address)
            if writer is None or writer.is_closing():
                writer = await self._connect(address)
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
        self.writers[address] = writer
        return writer
