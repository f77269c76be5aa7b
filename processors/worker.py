"""Runs one Faust worker process with the service's settings, in the current generation."""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path

import faust

from infra.control import current_generation, log_identity
from infra.heap import collect_less_often, freeze_startup_objects, map_large_blocks
from infra.kafka import ensure_changelogs, until_coordinator
from infra.settings import Settings
from processors.app import create_app

log = logging.getLogger("callscreen.worker")
LOG_ID_FILE = "log-id"


def run_worker(settings: Settings) -> None:
    map_large_blocks()
    base = Path(settings.data_dir) / f"worker-{settings.worker_index}"
    forget_stale_tables(base, asyncio.run(log_identity(settings)))
    generation = asyncio.run(current_generation(settings))
    worker_dir = base / f"gen-{generation.number}"
    for stale in base.glob("gen-*"):
        if stale != worker_dir:
            # Tables of an earlier generation: a rebuild replaced them.
            shutil.rmtree(stale)
    app = create_app(settings, worker_dir, generation)
    asyncio.run(ensure_changelogs(settings, [table.changelog_topic.get_topic_name() for table in app.tables.values()]))
    # Faust's table manager no longer sleeps a second at start (processors/faust/patches.py), and on a new
    # broker the group's first lookup then came before its coordinator was loaded, logged at error level.
    asyncio.run(until_coordinator(settings, app.conf.id))
    worker = faust_worker(app, settings.log_level)
    freeze_startup_objects()
    collect_less_often()
    worker.execute_from_commandline()


def faust_worker(app: faust.App, loglevel: str) -> faust.Worker:
    """Faust's worker with the service's logging and no start-up spinner: the spinner's terminal control
    codes go to stdout, which is the service's log (or a bench floor's result line), and ran into the next
    JSON line there, so a reader of JSON lines lost that line."""
    worker = faust.Worker(app, loglevel=loglevel, quiet=True, override_logging=False)
    worker.spinner = None
    return worker


def forget_stale_tables(base: Path, log_id: str) -> None:
    """Tables folded from another log (a broker that restarted empty) are never served: start over."""
    marker = base / LOG_ID_FILE
    known = marker.read_text() if marker.exists() else None
    if known != log_id and base.exists():
        log.warning(
            "these tables were folded from another log (did the broker restart empty?); rebuilding from the topics",
            extra={"tables": str(base), "log_id": log_id, "tables_log_id": known},
        )
        shutil.rmtree(base)
    base.mkdir(parents=True, exist_ok=True)
    marker.write_text(log_id)
