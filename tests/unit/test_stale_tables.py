"""A worker's tables belong to one log; folded from another (an emptied broker), they are dropped."""

from __future__ import annotations

from pathlib import Path

from processors.worker import LOG_ID_FILE, forget_stale_tables


def test_tables_of_the_same_log_are_kept(tmp_path: Path) -> None:
    base = tmp_path / "worker-0"
    forget_stale_tables(base, "log-a")
    (base / "gen-0").mkdir()
    forget_stale_tables(base, "log-a")
    assert (base / "gen-0").exists()


def test_tables_of_another_log_are_dropped(tmp_path: Path) -> None:
    base = tmp_path / "worker-0"
    forget_stale_tables(base, "log-a")
    (base / "gen-0").mkdir()
    forget_stale_tables(base, "log-b")
    assert not (base / "gen-0").exists()
    assert (base / LOG_ID_FILE).read_text() == "log-b"


def test_tables_of_an_unknown_log_are_dropped(tmp_path: Path) -> None:
    base = tmp_path / "worker-0"
    (base / "gen-0").mkdir(parents=True)
    forget_stale_tables(base, "log-a")
    assert not (base / "gen-0").exists()
