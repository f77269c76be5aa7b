"""Whether a worker's local tables may hold writes their changelogs lack.

A fold writes its rows to RocksDB at once and to the changelogs behind (processors/write_behind.py).
After a kill, the local rows can be ahead of the changelogs, and the refold of the uncommitted events
finds its own rows and writes nothing: this worker keeps answering right, but the next owner of the
partition recovers it from the changelog without those rows. So a mark is set while the worker runs and
cleared only once a clean stop has put every folded row on its changelog; a worker that finds the mark
at start drops its local tables and recovers them from the changelogs, and the refold rewrites the rest.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

log = logging.getLogger(__name__)
MARK_FILE = "unclean"


class UncleanMark:
    def __init__(self, worker_dir: Path, tables_dir: Path) -> None:
        self.path = worker_dir / MARK_FILE
        self.tables_dir = tables_dir

    def start(self) -> None:
        """Drop the local tables if the last run did not stop cleanly; then mark this run as unclean."""
        if self.path.exists() and self.tables_dir.exists():
            log.warning(
                "the last run stopped before its tables were on their changelogs; recovering them from the changelogs",
                extra={"tables": str(self.tables_dir)},
            )
            shutil.rmtree(self.tables_dir)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.touch()

    def clear(self) -> None:
        """Every row folded is on its changelog: the next start may keep the local tables."""
        self.path.unlink(missing_ok=True)
