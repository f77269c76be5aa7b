"""Static membership of a consumer group: a member's id, and the LeaveGroup aiokafka leaves out.

A process restarted after a crash that joins under the id of the member it replaces gets that member's
partitions at once. A dynamic member waited out the dead one's session (10 s) first, and every fold,
answer and delivery waited with it (docs/decisions/0034-restart-after-sigkill.md).

Upstream: aiokafka's `GroupCoordinator.maybe_leave_group` sends LeaveGroup only without a
`group_instance_id`, as KIP-345 intends (aio-libs/aiokafka#682, #827); a clean stop must move the
partitions at once all the same.
"""

from __future__ import annotations

import hashlib
import re
import socket
from pathlib import Path
from typing import Any

from aiokafka.consumer.group_coordinator import GroupCoordinator

_maybe_leave_group = GroupCoordinator._maybe_leave_group


def group_instance(directory: Path) -> str:
    """A member id made of this host and `directory`: the same at every start of the process that keeps its
    state there, and different for each such process. Kafka takes letters, digits, ".", "_" and "-"."""
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:200]
    return f"{host}-{hashlib.sha256(str(directory.resolve()).encode()).hexdigest()[:16]}"


def leave_group_on_stop() -> None:
    """A static member leaves its group as a dynamic one does when it stops (or idles past the poll
    interval), so its partitions move at once: aiokafka sends no LeaveGroup for a static member, and a
    clean stop left its partitions with nobody until its session timed out. After a crash none is sent,
    and the restarted process takes its partitions back under the same id."""

    async def leave(self: Any) -> None:
        instance_id, self._group_instance_id = self._group_instance_id, None
        try:
            await _maybe_leave_group(self)
        finally:
            self._group_instance_id = instance_id

    GroupCoordinator._maybe_leave_group = leave
