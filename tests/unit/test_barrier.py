"""The barrier forgets a number's last fact only once the detector has folded it."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from aiokafka.structs import RecordMetadata, TopicPartition

from processors.barrier import KEEP, Barrier
from processors.mirror import FactMirror


def acked(partition: int, offset: int) -> asyncio.Future[Any]:
    ack: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    ack.set_result(RecordMetadata("decisions", partition, TopicPartition("decisions", partition), offset, 0, 0, 0))
    return ack


async def test_past_its_limit_it_keeps_an_acknowledged_fact_the_detector_has_not_folded() -> None:
    barrier = Barrier(cast(FactMirror, None), wait_s=5.0)
    barrier.appended("acct:+15550000001", acked(0, 7))
    barrier.detector_folded(1, KEEP)
    for offset in range(KEEP):
        barrier.appended(f"acct:{offset}", acked(1, offset))
    assert list(barrier.last_fact) == ["acct:+15550000001"]

    waiting = asyncio.create_task(barrier.consequences_of("acct:+15550000001"))
    done, _ = await asyncio.wait([waiting], timeout=0.05)
    assert not done
    barrier.detector_folded(0, 7)
    await asyncio.wait_for(waiting, 1.0)


async def test_a_fact_whose_ack_is_pending_is_kept() -> None:
    barrier = Barrier(cast(FactMirror, None), wait_s=5.0)
    pending: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    barrier.appended("acct:+15550000001", pending)
    barrier.detector_folded(1, KEEP)
    for offset in range(KEEP):
        barrier.appended(f"acct:{offset}", acked(1, offset))
    assert list(barrier.last_fact) == ["acct:+15550000001"]
