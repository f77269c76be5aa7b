"""Fault injection for the kill tests: the worker SIGKILLs itself at one of four steps of a fold.

Off unless the `faults` setting names a plan, `every=N,limit=M`. The points take turns: a worker arms
the next point in `POINTS` after the kills its data dir's `faults.log` records so far, and kills itself
the Nth time it passes that point, once the log has the line. The workers of one data dir share the log
under a lock, so with several workers the kills still take turns and stop at `limit`. Only tests set it
(tests/hostile/test_fault_kills.py).
"""

from __future__ import annotations

import fcntl
import os
import signal
from pathlib import Path

POINTS = ("after_write", "after_append", "before_ack", "before_commit")
LOG_NAME = "faults.log"


class Faults:
    def __init__(self, plan: str, data_dir: Path) -> None:
        fields = dict(part.split("=", 1) for part in plan.split(",") if "=" in part)
        self.every = int(fields.get("every", "0"))
        self.limit = int(fields.get("limit", "0"))
        self.log = data_dir / LOG_NAME
        self.armed = self._next(self._done()) if self.every > 0 else None
        self.hits = 0

    def _done(self) -> int:
        return len(self.log.read_text().splitlines()) if self.log.exists() else 0

    def _next(self, done: int) -> str | None:
        return POINTS[done % len(POINTS)] if done < self.limit else None

    def at(self, point: str) -> None:
        """Passing `point`: die here when it is armed and its turn has come."""
        if point != self.armed:
            return
        self.hits += 1
        if self.hits < self.every:
            return
        with self.log.open("a") as log:
            # Another worker may have killed itself since this one armed: take the turn the log gives.
            fcntl.flock(log, fcntl.LOCK_EX)
            turn = self._next(self._done())
            if turn != point:
                self.armed, self.hits = turn, 0
                return
            log.write(point + "\n")
            log.flush()
            os.fsync(log.fileno())
            os.kill(os.getpid(), signal.SIGKILL)
