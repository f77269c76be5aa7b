"""Length-prefixed JSON frames: the direct reply channel from a worker to the edge that asked."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import msgspec

HEADER = struct.Struct(">I")


def encode(message: dict[str, Any]) -> bytes:
    """One frame; values may be msgspec structs (a start's answer)."""
    body = msgspec.json.encode(message)
    return HEADER.pack(len(body)) + body


async def read(reader: asyncio.StreamReader) -> dict[str, Any]:
    """The next frame; raises asyncio.IncompleteReadError when the peer closed."""
    (size,) = HEADER.unpack(await reader.readexactly(HEADER.size))
    message: dict[str, Any] = msgspec.json.decode(await reader.readexactly(size))
    return message
