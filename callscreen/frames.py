"""Length-prefixed JSON frames: the direct reply channel from a worker to the edge that asked."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import orjson

HEADER = struct.Struct(">I")


def encode(message: dict[str, Any]) -> bytes:
    body = orjson.dumps(message)
    return HEADER.pack(len(body)) + body


async def read(reader: asyncio.StreamReader) -> dict[str, Any]:
    """The next frame; raises asyncio.IncompleteReadError when the peer closed."""
    (size,) = HEADER.unpack(await reader.readexactly(HEADER.size))
    message: dict[str, Any] = orjson.loads(await reader.readexactly(size))
    return message
