"""A Faust table whose changelog gets each key's last value once per flush instead of every write.

Stock Faust sends one changelog record per table write. A call's record is rewritten by every
turn event, and on the embedded broker each record is a produce of its own, so the changelog was
most of a worker's cost. Here a write goes to RocksDB at once (reads see it) and marks the key
dirty; `flush_changelog` sends the dirty keys' last values. The runtime acknowledges an event only
once a flush that covers its writes is acknowledged, so a committed offset never runs ahead of the
changelog; a crash refolds the uncommitted events, and every fold is idempotent.

The flush sends straight to the producer rather than through Faust's send buffer: Faust holds the
stream back while that buffer is full, and a burst of changelog records there stalled every answer.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import faust
from faust.types import RecordMetadata

# Marks a deleted key among the dirty ones (None is a legitimate "no value" for Faust's serializers).
_DELETED = object()


class WriteBehindTable(faust.Table[bytes, bytes]):
    """Changelog writes coalesced per key until `flush_changelog`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._dirty: dict[tuple[int, Any], Any] = {}

    def on_key_set(self, key: Any, value: Any) -> None:
        self._dirty[(self._partition(key), key)] = value
        self._sensor_on_set(self, key, value)

    def on_key_del(self, key: Any) -> None:
        self._dirty[(self._partition(key), key)] = _DELETED
        self._sensor_on_del(self, key)

    def _partition(self, key: Any) -> int:
        partition = self.partition_for_key(key)
        # The runtime's tables never use the producer's partitioner: a key lives in its event's partition.
        assert partition is not None
        return partition

    async def flush_changelog(self) -> list[Awaitable[RecordMetadata]]:
        """Send the dirty keys' last values to the changelog; returns the acks to wait for."""
        dirty, self._dirty = self._dirty, {}
        acks = []
        for (partition, key), value in dirty.items():
            deleted = value is _DELETED
            ack = await self.changelog_topic.send(
                key=key,
                value=None if deleted else value,
                partition=partition,
                key_serializer=self.key_serializer,
                value_serializer="raw" if deleted else self.value_serializer,
                callback=self._on_changelog_sent,
                force=True,
            )
            acks.append(ack)
        return acks
