"""Which alerts offsets the alerting role may commit: up to the first alert whose delivery records are not acked.

An alert is settled once the first record of each of its deliveries (the webhook's, and each email, text
or voice message's) on the deliveries topic (skipped, or the attempt before the send) is acknowledged.
Committing no further means a crash, a stop or a rebalance hands every alert that was only read or
queued to the partition's next owner, and none that was already attempted.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

P = TypeVar("P", bound=Hashable)


class ReadOffsets(Generic[P]):
    """Per partition: the offsets read and not yet settled (with how many holds each still has), and the
    offset after the last one read."""

    def __init__(self) -> None:
        self.open: dict[P, dict[int, int]] = {}
        self.after: dict[P, int] = {}

    def read(self, partition: P, offset: int) -> None:
        """The record at `offset` is read; it holds the commit until settled once."""
        self.hold(partition, offset)
        self.after[partition] = max(self.after.get(partition, 0), offset + 1)

    def hold(self, partition: P, offset: int) -> None:
        """One more piece of work on the record at `offset`, which then needs one more `settle`."""
        holds = self.open.setdefault(partition, {})
        holds[offset] = holds.get(offset, 0) + 1

    def settle(self, partition: P, offset: int) -> None:
        """One hold on the record at `offset` is done; a partition already forgotten stays forgotten."""
        holds = self.open.get(partition)
        if holds is None or offset not in holds:
            return
        if holds[offset] > 1:
            holds[offset] -= 1
        else:
            del holds[offset]

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
