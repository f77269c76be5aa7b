"""How long an outbound attempt took, on the clock its timeouts run on.

That is the event loop's clock. uvloop's is libuv's, kept in whole milliseconds and read once per
loop iteration, so it runs a little behind the system's monotonic clock: timed by that clock, an
attempt cut off by a 2 s timeout read 1,999 ms. Timed by the loop's, it never reads shorter than its
timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


def stopwatch() -> Callable[[], int]:
    """Starts now; the function it returns gives the whole milliseconds since."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    # Rounded, not truncated: libuv's milliseconds come back as floats a hair under the whole number.
    return lambda: round((loop.time() - started) * 1000)
