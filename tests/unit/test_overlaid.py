"""A table's range read: RocksDB's rows with those written since the last flush laid over them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import cast

from rocksdict import Options, Rdict

from processors.state.write_behind import overlaid

STORED = [(b"a", b"1"), (b"c", b"3"), (b"e", b"5"), (b"g", b"7")]


def read(written: list[tuple[bytes, bytes | None]], high: bytes = b"z") -> list[tuple[bytes, bytes]]:
    return list(overlaid(iter(STORED), written, b"", high))


def read_backwards(
    written: list[tuple[bytes, bytes | None]], low: bytes = b"", high: bytes = b"z"
) -> list[tuple[bytes, bytes]]:
    """As RocksDB reads backwards from `high`: from the last key not above it."""
    stored = reversed([row for row in STORED if row[0] <= high])
    return list(overlaid(stored, sorted(written, reverse=True), low, high, backwards=True))


def test_nothing_written_reads_what_is_stored_below_the_bound() -> None:
    assert read([]) == STORED
    assert read([], high=b"e") == [(b"a", b"1"), (b"c", b"3")]


def test_written_rows_fall_in_key_order_and_replace_or_delete_stored_ones() -> None:
    written: list[tuple[bytes, bytes | None]] = [(b"0", b"n"), (b"c", b"33"), (b"d", b"4"), (b"e", None), (b"h", b"8")]
    assert read(written) == [(b"0", b"n"), (b"a", b"1"), (b"c", b"33"), (b"d", b"4"), (b"g", b"7"), (b"h", b"8")]


def test_a_deletion_of_a_row_never_stored_yields_nothing() -> None:
    assert read([(b"b", None), (b"x", None)]) == STORED


def test_rows_are_read_only_as_far_as_the_caller_goes() -> None:
    """The horizon takes an hour's first entry of thousands: the rest are never fetched."""
    fetched: list[bytes] = []

    def stored() -> Iterator[tuple[bytes, bytes]]:
        for key, value in STORED:
            fetched.append(key)
            yield key, value

    rows = overlaid(stored(), [], b"", b"z")
    assert next(rows) == (b"a", b"1")
    assert fetched == [b"a"]


def test_backwards_every_row_comes_in_reverse_key_order_inside_the_range() -> None:
    written: list[tuple[bytes, bytes | None]] = [(b"b", b"2"), (b"e", None), (b"f", b"6")]
    assert read_backwards(written) == [(b"g", b"7"), (b"f", b"6"), (b"c", b"3"), (b"b", b"2"), (b"a", b"1")]


def test_backwards_the_range_leaves_out_its_high_key_and_what_lies_below_its_low_one() -> None:
    """RocksDB's backward read starts at `high` itself when it is stored; the range ends before it."""
    assert read_backwards([], low=b"b", high=b"g") == [(b"e", b"5"), (b"c", b"3")]
    assert read_backwards([(b"d", b"4")], low=b"c", high=b"e") == [(b"d", b"4"), (b"c", b"3")]


def test_backwards_over_rocksdb_itself(tmp_path: Path) -> None:
    """RocksDB's backward read from `high` (as `WriteBehindTable.scan` asks it) starts at `high` when it is stored."""
    db = Rdict(str(tmp_path / "db"), options=Options(raw_mode=True))
    for key, value in STORED:
        db[key] = value
    try:
        # Opened in raw mode: its keys and values are bytes.
        stored = cast(Iterator[tuple[bytes, bytes]], db.items(backwards=True, from_key=b"e"))
        rows = overlaid(stored, [(b"d", b"4")], b"b", b"e", backwards=True)
        assert list(rows) == [(b"d", b"4"), (b"c", b"3")]
    finally:
        db.close()
