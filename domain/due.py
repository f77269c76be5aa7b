"""When a sweep must look at a call or a number again, with no further event: what a fold's outcome says
of its key's row in the sweep table."""

from __future__ import annotations

from typing import NamedTuple


class Due(NamedTuple):
    # The rule's time (event time, the tick's).
    at: int
    # From when, by the edge's clock, the tick may go out: as late as the platform reports the key's events.
    tick_after: int
