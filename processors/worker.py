"""Runs one Faust worker process with the service's settings."""

from __future__ import annotations

from pathlib import Path

import faust

from callscreen.settings import Settings
from processors.app import create_app


def run_worker(settings: Settings) -> None:
    worker_dir = Path(settings.data_dir) / f"worker-{settings.worker_index}"
    app = create_app(settings, worker_dir)
    worker = faust.Worker(app, loglevel=settings.log_level, quiet=True, override_logging=False)
    worker.execute_from_commandline()
