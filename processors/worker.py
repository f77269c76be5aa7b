"""Runs one Faust worker process with the service's settings, in the current generation."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import faust

from callscreen.control import current_generation
from callscreen.settings import Settings
from processors.app import create_app


def run_worker(settings: Settings) -> None:
    generation = asyncio.run(current_generation(settings))
    base = Path(settings.data_dir) / f"worker-{settings.worker_index}"
    worker_dir = base / f"gen-{generation.number}"
    for stale in base.glob("gen-*"):
        if stale != worker_dir:
            # Tables of an earlier generation: a rebuild replaced them.
            shutil.rmtree(stale)
    app = create_app(settings, worker_dir, generation)
    worker = faust.Worker(app, loglevel=settings.log_level, quiet=True, override_logging=False)
    worker.execute_from_commandline()
