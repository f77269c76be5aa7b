"""The wall clock: read only where time enters the log (the edge's receipt time, admin commands,
the sweep's ticks), never inside a fold."""

from __future__ import annotations

from datetime import UTC, datetime


def now_ms() -> int:
    return int(datetime.now(tz=UTC).timestamp() * 1000)
