"""The event loop every process runs on.

uvloop by default: libuv's socket writes and callback scheduling cost each process less CPU per
request than asyncio's selector loop, and every hop of an answer crosses several processes on the
same cores (docs/decisions/0015-every-process-on-uvloop.md).
"""

from __future__ import annotations

import asyncio

import uvloop

LOOPS = ("uvloop", "asyncio")


def install(name: str) -> None:
    """Make `name` the loop of every `asyncio.run` and Faust worker in this process."""
    if name not in LOOPS:
        raise ValueError(f"event_loop must be one of {', '.join(LOOPS)}, not {name!r}")
    if name == "uvloop":
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
