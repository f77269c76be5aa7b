"""Where admin commands point a dashboard link: the public URL, else the edge `run` recorded in the data
dir, else the settings' own host and port (callscreen.broker)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from callscreen.broker import EDGE_FILE, forget_edge, record_edge, recorded_edge
from infra.settings import Settings


def test_links_point_at_the_edge_run_recorded_unless_a_public_url_is_set(tmp_path: Path) -> None:
    settings = Settings(data_dir=str(tmp_path))
    assert recorded_edge(settings).dashboard_url == "http://127.0.0.1:8080"
    record_edge(tmp_path, "127.0.0.1", 9123, os.getpid())
    assert recorded_edge(settings).dashboard_url == "http://127.0.0.1:9123"
    public = settings.with_overrides(public_url="https://screen.example.com")
    assert recorded_edge(public).dashboard_url == "https://screen.example.com"


def test_the_record_of_a_run_that_is_gone_is_ignored(tmp_path: Path) -> None:
    ended = subprocess.Popen(["true"])
    ended.wait()
    record_edge(tmp_path, "127.0.0.1", 9123, ended.pid)
    assert recorded_edge(Settings(data_dir=str(tmp_path))).dashboard_url == "http://127.0.0.1:8080"


def test_a_run_forgets_only_its_own_record(tmp_path: Path) -> None:
    record_edge(tmp_path, "127.0.0.1", 9123, os.getpid())
    forget_edge(tmp_path, os.getpid() + 1)
    assert (tmp_path / EDGE_FILE).exists()
    forget_edge(tmp_path, os.getpid())
    assert not (tmp_path / EDGE_FILE).exists()
