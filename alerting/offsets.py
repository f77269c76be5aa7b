"""Which alerts offsets the alerting role may commit: up to the first alert whose delivery record is not acked.

An alert is settled once its first record on the deliveries topic (skipped, or the attempt before its
POST) is acknowledged. Committing no further means a crash, a stop or a rebalance hands every alert
that was only read or queued to the partition's next owner, and none that was already attempted.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

P = TypeVar("P", bound=Hashable)


class ReadOffsets(Generic[P]):
    """Per partition: the offsets read and not yet settled, and the offset after the last one read."""

    def __init__(self) -> None:
        self.open: dict[P, set[int]] = {}
        self.after: dict[P, int] = {}

    def read(self, partition: P, offset: int) -> None:
        self.open.setdefault(partition, set()).add(offset)
        self.after[partition] = max(self.after.get(partition, 0), offset + 1)

    def settle(self, partition: P, offset: int) -> None:
        """The record at `offset` is handled; a partition already forgotten stays forgotten."""
        if partition in self.open:
            self.open[partition].discard(offset)

    def committable(self, partition: P) -> int | None:
        """The offset to commit: the first unsettled one, or the one after everything read; None if nothing was."""
        waiting = self.open.get(partition)
        if waiting:
            return min(waiting)
        return self.after.get(partition)

    def forget(self, partitions: Iterable[P]) -> None:
        for partition in partitions:
            self.open.pop(partition, None)
            self.after.pop(partition, None)
