"""The sweeps' due-time index: due keys by time, moved and cleared ones never ticked at a stale time."""

from __future__ import annotations

from processors.folds.shell import TICK_REPEAT_MS, DueIndex


def test_only_keys_due_by_now_and_at_their_current_time() -> None:
    index = DueIndex()
    index.rebuild([("a", 100, 100), ("b", 300, 300)], frozenset({1}))
    index.set("c", 200)
    index.set("a", 250)  # a fold moved it
    index.set("b", None)  # a fold cleared it
    assert index.due(150) == []
    assert sorted(index.due(260)) == [("a", 250), ("c", 200)]
    # Still due until a fold moves or clears them.
    assert sorted(index.due(270)) == [("a", 250), ("c", 200)]
    index.set("c", None)
    assert index.due(1000) == [("a", 250)]
    assert len(index) == 1 and index.built_for == frozenset({1})


def test_stale_entries_never_outgrow_the_rows() -> None:
    index = DueIndex()
    for due in range(10_000):
        index.set("moving", 10**9 + due)
    assert len(index.heap) <= 4 * len(index.current) + 64
    assert index.due(2 * 10**9) == [("moving", 10**9 + 9_999)]


def test_a_key_ticks_from_its_own_time_at_its_due_time() -> None:
    index = DueIndex()
    # "late" is due at 100 in event time; its platform reports it 500 behind its own clock.
    index.rebuild([("late", 100, 600), ("b", 200, 200)], frozenset())
    assert index.due(599) == [("b", 200)]
    assert sorted(index.due(600)) == [("b", 200), ("late", 100)]
    # A later report moves when it may tick, not the time it ticks at.
    index.set("late", 100, 900)
    assert index.due(800) == [("b", 200)]
    assert sorted(index.due(900)) == [("b", 200), ("late", 100)]


def test_a_key_still_due_is_handed_out_again_only_after_the_repeat_interval() -> None:
    t0 = 1_700_000_000_000  # the edge's clock
    index = DueIndex()
    index.set("a", t0)
    assert index.to_tick(t0) == [("a", t0)]
    # Its fold has not moved it yet: not again until TICK_REPEAT_MS later.
    assert index.to_tick(t0 + TICK_REPEAT_MS - 1) == []
    assert index.to_tick(t0 + TICK_REPEAT_MS) == [("a", t0)]
    # Cleared and due again: handed out at once, the old hand-out forgotten.
    index.set("a", None)
    assert index.to_tick(t0 + TICK_REPEAT_MS + 1) == []
    index.set("a", t0 + 2)
    assert index.to_tick(t0 + TICK_REPEAT_MS + 2) == [("a", t0 + 2)]


def test_it_is_rebuilt_from_the_table_only_when_the_assignment_changes() -> None:
    index = DueIndex()
    reads: list[int] = []

    def rows() -> list[tuple[str, int, int]]:
        reads.append(1)
        return [("a", 100, 100)]

    index.built(frozenset({1}), rows)
    index.built(frozenset({1}), rows)
    assert len(reads) == 1 and index.due(100) == [("a", 100)]
    index.built(frozenset({1, 2}), rows)
    assert len(reads) == 2 and index.built_for == frozenset({1, 2})
