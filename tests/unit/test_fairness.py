"""The fair scheduler (domain.fairness): per-account queues, round-robin, per-account and total caps."""

from __future__ import annotations

import pytest

from domain.fairness import FairQueues


def started(queues: FairQueues[str]) -> list[str]:
    """Every item that may start now, in the order they start."""
    items = []
    while (picked := queues.next()) is not None:
        items.append(picked[1])
    return items


def test_accounts_take_turns_whatever_order_their_items_came_in() -> None:
    queues: FairQueues[str] = FairQueues(total=100, per_key=100, limit=100)
    for i in range(4):
        queues.offer("flood", f"f{i}")
    queues.offer("quiet", "q0")
    queues.offer("other", "o0")
    assert started(queues) == ["f0", "q0", "o0", "f1", "f2", "f3"]


def test_one_account_never_holds_more_than_its_slots() -> None:
    queues: FairQueues[str] = FairQueues(total=32, per_key=4, limit=1000)
    for i in range(50):
        queues.offer("flood", f"f{i}")
    assert started(queues) == ["f0", "f1", "f2", "f3"]
    assert (queues.in_flight("flood"), queues.queued("flood")) == (4, 46)
    queues.offer("quiet", "q0")
    assert started(queues) == ["q0"]
    queues.done("flood")
    assert started(queues) == ["f4"]


def test_the_total_cap_holds_across_accounts_and_frees_in_turn() -> None:
    queues: FairQueues[str] = FairQueues(total=3, per_key=2, limit=10)
    for key in ("a", "b"):
        for i in range(3):
            queues.offer(key, f"{key}{i}")
    assert started(queues) == ["a0", "b0", "a1"]
    queues.done("a")
    assert started(queues) == ["b1"]
    queues.done("b")
    queues.done("b")
    assert started(queues) == ["a2", "b2"]
    assert (queues.in_flight("a"), queues.in_flight("b"), queues.busy) == (2, 1, 3)


def test_a_full_queue_refuses_and_keeps_what_it_had() -> None:
    queues: FairQueues[str] = FairQueues(total=1, per_key=1, limit=2)
    assert queues.offer("a", "a0") and queues.offer("a", "a1")
    assert not queues.room("a")
    assert not queues.offer("a", "a2")
    assert queues.room("b") and queues.offer("b", "b0")
    assert queues.queued("a") == 2
    assert started(queues) == ["a0"]
    assert queues.room("a")


def test_drop_removes_queued_items_only() -> None:
    queues: FairQueues[str] = FairQueues(total=10, per_key=1, limit=10)
    for item in ("a0", "a1", "b0", "b1"):
        queues.offer(item[0], item)
    assert started(queues) == ["a0", "b0"]
    assert queues.drop(lambda item: item.startswith("a")) == ["a1"]
    assert queues.queued("a") == 0 and queues.in_flight("a") == 1
    queues.done("a")
    queues.done("b")
    assert started(queues) == ["b1"]


def test_caps_below_one_are_refused() -> None:
    with pytest.raises(ValueError):
        FairQueues(total=0, per_key=1, limit=1)
