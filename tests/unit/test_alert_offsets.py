"""What the alerting role commits (alerting.offsets): up to the first alert whose record is not acked."""

from __future__ import annotations

from alerting.offsets import ReadOffsets


def test_commits_stop_at_the_first_unsettled_alert() -> None:
    offsets: ReadOffsets[int] = ReadOffsets()
    assert offsets.committable(0) is None
    for offset in (10, 11, 12):
        offsets.read(0, offset)
    offsets.settle(0, 11)
    assert offsets.committable(0) == 10
    offsets.settle(0, 10)
    assert offsets.committable(0) == 12
    offsets.settle(0, 12)
    assert offsets.committable(0) == 13


def test_partitions_are_apart_and_forgetting_one_ignores_late_acks() -> None:
    offsets: ReadOffsets[int] = ReadOffsets()
    offsets.read(0, 5)
    offsets.read(1, 7)
    offsets.settle(1, 7)
    assert (offsets.committable(0), offsets.committable(1)) == (5, 8)
    offsets.forget([0])
    offsets.settle(0, 5)
    assert offsets.committable(0) is None


def test_an_alert_with_several_deliveries_waits_for_every_one() -> None:
    offsets: ReadOffsets[int] = ReadOffsets()
    offsets.read(0, 3)
    offsets.hold(0, 3)
    offsets.hold(0, 3)
    offsets.settle(0, 3)
    offsets.settle(0, 3)
    assert offsets.committable(0) == 3
    offsets.settle(0, 3)
    assert offsets.committable(0) == 4
