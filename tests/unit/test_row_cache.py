"""The rows a worker keeps decoded (processors/state/row_cache.py)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from processors.state.row_cache import RowCache, RowMismatch, fits


class Call(msgspec.Struct, frozen=True, tag=True):
    score: float
    seen: list[str]


class Alias(msgspec.Struct, frozen=True, tag=True):
    target: str


def kept(cache: RowCache, slot: tuple[str, int, bytes], value: Any) -> bytes:
    raw = msgspec.json.encode(value)
    cache.put(slot, raw, value)
    return raw


def test_a_kept_struct_serves_reads_as_its_type_or_a_union_with_it_and_no_other() -> None:
    call = Call(score=0.5, seen=["a"])
    assert fits(call, Call) and fits(call, Call | Alias)
    assert not fits(call, Alias) and not fits(call, Any) and not fits(None, Call)


def test_a_row_is_kept_by_its_slot() -> None:
    cache = RowCache(max_bytes=10_000)
    call = Call(score=0.5, seen=["a"])
    raw = kept(cache, ("calls", 0, b"k"), call)
    assert cache.row(("calls", 0, b"k")) == (raw, call)
    assert cache.row(("calls", 0, b"k"))[1] is call  # type: ignore[index]
    assert cache.row(("calls", 1, b"k")) is None
    assert cache.row(("other", 0, b"k")) is None


def test_a_row_that_is_not_a_struct_is_kept_without_a_value() -> None:
    cache = RowCache(max_bytes=10_000)
    cache.put(("sweeps", 0, b"k"), b"17", 17)
    cache.put(("index", 0, b"k"), b'["a"]', ["a"])
    assert cache.row(("sweeps", 0, b"k")) == (b"17", None)
    assert cache.row(("index", 0, b"k")) == (b'["a"]', None)
    assert cache.held == 7


def test_past_its_bytes_the_least_recently_used_row_goes_first() -> None:
    one, two, three = Call(score=0.1, seen=[]), Call(score=0.2, seen=[]), Call(score=0.3, seen=[])
    size = len(msgspec.json.encode(one))
    cache = RowCache(max_bytes=2 * size)
    kept(cache, ("calls", 0, b"1"), one)
    kept(cache, ("calls", 0, b"2"), two)
    assert cache.row(("calls", 0, b"1")) is not None
    kept(cache, ("calls", 0, b"3"), three)
    assert cache.row(("calls", 0, b"2")) is None
    assert [cache.row(("calls", 0, key)) for key in (b"1", b"3")] == [
        (msgspec.json.encode(one), one),
        (msgspec.json.encode(three), three),
    ]
    assert cache.held == 2 * size


def test_a_row_written_again_or_dropped_is_no_longer_served() -> None:
    cache = RowCache(max_bytes=10_000)
    kept(cache, ("calls", 0, b"k"), Call(score=0.1, seen=[]))
    later = Call(score=0.9, seen=["b"])
    raw = kept(cache, ("calls", 0, b"k"), later)
    assert cache.row(("calls", 0, b"k")) == (raw, later)
    assert cache.held == len(raw)
    cache.drop(("calls", 0, b"k"))
    assert cache.row(("calls", 0, b"k")) is None
    assert cache.held == 0
    kept(cache, ("calls", 0, b"k"), later)
    kept(cache, ("alerts", 0, b"k"), later)
    cache.drop_table("calls")
    assert cache.row(("calls", 0, b"k")) is None
    assert cache.row(("alerts", 0, b"k")) == (raw, later)


@pytest.mark.parametrize(
    "written",
    [Call(score=3, seen=["a"]), Call(score=0.5, seen=("a",))],  # type: ignore[arg-type]
    ids=["an int where a float is declared", "a tuple where a list is declared"],
)
def test_in_check_mode_a_struct_its_row_would_not_decode_to_is_refused(written: Call) -> None:
    cache = RowCache(max_bytes=10_000, check=True)
    with pytest.raises(RowMismatch):
        kept(cache, ("calls", 0, b"k"), written)
    assert cache.row(("calls", 0, b"k")) is None
    kept(RowCache(max_bytes=10_000), ("calls", 0, b"k"), written)
    kept(cache, ("calls", 0, b"k"), Call(score=3.0, seen=["a"]))
