"""Length-prefixed JSON frames: the direct reply channel from a worker to the edge that asked."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import struct
from typing import Any

import msgspec

HEADER = struct.Struct(">I")
# An answer is a few KiB; a peer that announces more is not a worker and is cut off.
MAX_FRAME = 1024 * 1024


class FrameTooLarge(Exception):
    """A frame over MAX_FRAME was announced."""


def hello(token: str) -> dict[str, Any]:
    """The first frame a worker sends on a reply connection: the shared token, as its HMAC over a
    fixed label, so the token itself never crosses the wire."""
    return {"hello": proof(token)}


def proof(token: str) -> str:
    return hmac.new(token.encode(), b"callscreen reply channel", hashlib.sha256).hexdigest()


def greets(message: dict[str, Any], token: str) -> bool:
    """True when `message` is a hello with the proof for `token`."""
    given = message.get("hello")
    return isinstance(given, str) and hmac.compare_digest(given, proof(token))


def encode(message: dict[str, Any]) -> bytes:
    """One frame; values may be msgspec structs (a start's answer)."""
    body = msgspec.json.encode(message)
    return HEADER.pack(len(body)) + body


async def read(reader: asyncio.StreamReader) -> dict[str, Any]:
    """The next frame; raises asyncio.IncompleteReadError when the peer closed."""
    (size,) = HEADER.unpack(await reader.readexactly(HEADER.size))
    if size > MAX_FRAME:
        raise FrameTooLarge(size)
    message: dict[str, Any] = msgspec.json.decode(await reader.readexactly(size))
    return message
