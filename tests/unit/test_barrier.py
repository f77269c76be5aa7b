"""The barrier forgets a number's last fact only once the detector has folded it."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from aiokafka.structs import RecordMetadata, TopicPartition

from processors.state.mirror import KEEP, Barrier, FactMirror


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


async def test_with_the_detector_keeping_up_it_holds_at_most_its_limit() -> None:
    barrier = Barrier(cast(FactMirror, None), wait_s=5.0)
    for offset in range(10 * KEEP):
        barrier.appended(f"acct:{offset}", acked(0, offset))
        barrier.detector_folded(0, offset)
    assert len(barrier.last_fact) <= KEEP


async def test_with_the_detector_behind_it_keeps_every_fact_it_has_not_folded() -> None:
    barrier = Barrier(cast(FactMirror, None), wait_s=5.0)
    for offset in range(5 * KEEP):
        barrier.appended(f"acct:{offset}", acked(0, offset))
    assert len(barrier.last_fact) == 5 * KEEP
    barrier.detector_folded(0, 5 * KEEP - 1)
    barrier.appended("acct:last", acked(0, 5 * KEEP))
    assert len(barrier.last_fact) == 5 * KEEP + 1
    for offset in range(5 * KEEP):
        barrier.appended(f"acct:again-{offset}", acked(0, 5 * KEEP + 1 + offset))
    assert "acct:0" not in barrier.last_fact
    assert "acct:last" in barrier.last_fact
