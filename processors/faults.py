"""Fault injection for the kill tests: the worker SIGKILLs itself at one of four steps of a fold.

Off unless the `faults` setting names a plan, `every=N,limit=M`. The points take turns: each worker
start counts the kills its data dir's `faults.log` records so far, arms the next point in `POINTS`,
and kills itself the Nth time it passes that point, once the log has the line. After `limit` kills
nothing is armed. Only tests set it (tests/hostile/test_fault_kills.py).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

POINTS = ("after_write", "after_append", "before_ack", "before_commit")
LOG_NAME = "faults.log"


class Faults:
    def __init__(self, plan: str, data_dir: Path) -> None:
        fields = dict(part.split("=", 1) for part in plan.split(",") if "=" in part)
        self.every = int(fields.get("every", "0"))
        self.log = data_dir / LOG_NAME
        done = len(self.log.read_text().splitlines()) if self.log.exists() else 0
        limit = int(fields.get("limit", "0"))
        self.armed = POINTS[done % len(POINTS)] if self.every > 0 and done < limit else None
        self.hits = 0

    def at(self, point: str) -> None:
        """Passing `point`: die here when it is armed and its turn has come."""
        if point != self.armed:
            return
        self.hits += 1
        if self.hits < self.every:
            return
        with self.log.open("a") as log:
            log.write(point + "\n")
            log.flush()
            os.fsync(log.fileno())
        os.kill(os.getpid(), signal.SIGKILL)
