"""A worker that did not stop cleanly drops its local tables at start (processors/unclean.py)."""

from __future__ import annotations

from pathlib import Path

from processors.unclean import UncleanMark


def mark(tmp_path: Path) -> UncleanMark:
    tables = tmp_path / "gen-0" / "faust"
    (tables / "calls.db").mkdir(parents=True)
    return UncleanMark(tmp_path / "gen-0", tables)


def test_tables_after_a_clean_stop_are_kept(tmp_path: Path) -> None:
    first = mark(tmp_path)
    first.start()
    first.clear()
    UncleanMark(first.path.parent, first.tables_dir).start()
    assert (first.tables_dir / "calls.db").exists()


def test_tables_after_a_kill_are_dropped(tmp_path: Path) -> None:
    first = mark(tmp_path)
    first.start()
    UncleanMark(first.path.parent, first.tables_dir).start()
    assert not first.tables_dir.exists()
    assert first.path.exists()


def test_a_first_start_keeps_what_is_there(tmp_path: Path) -> None:
    # Tables from before the mark existed (or restored by hand) are trusted as a clean stop's.
    first = mark(tmp_path)
    first.start()
    assert (first.tables_dir / "calls.db").exists()
