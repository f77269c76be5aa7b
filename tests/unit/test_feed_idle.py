"""A feed calls its fold idle only while the fold waits with nothing left in the buffer (`Feed.idle_since`):
the worker takes records its consumer fetched for lost only after its fold has been idle for a while
(tests/unit/test_lost_tails.py), so a fold busy with buffered records must never look idle.

The app here is a stand-in with the few parts of Faust's that a feed touches (flow control, the
consumer's bookkeeping of tracked records, the monitor): the rule is the feed's own.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

from faust.types import TP

from processors.faust.feed import Feed

PART = TP("t.events", 0)


class FlowControl:
    def manage_queue(self, queue: Any) -> None:
        pass

    def is_active(self) -> bool:
        return True


class Consumer:
    def track_message(self, message: Any) -> None:
        pass

    def assignment(self) -> set[TP]:
        return {PART}


def stand_in_app() -> Any:
    monitor = SimpleNamespace(stream_inbound_time={})
    return SimpleNamespace(flow_control=FlowControl(), consumer=Consumer(), monitor=monitor, consumer_generation_id=1)


def message(offset: int) -> Any:
    return SimpleNamespace(
        tp=PART, topic=PART.topic, partition=0, offset=offset, generation_id=1, key=b"k", value=b"{}", headers=[]
    )


async def waiting_for_next(events: Any) -> asyncio.Task[Any]:
    """The fold asking for its next record, run up to where it waits (one turn of the loop)."""
    task = asyncio.ensure_future(anext(events))
    await asyncio.sleep(0)
    return cast(asyncio.Task[Any], task)


async def test_idle_only_while_the_fold_waits_on_an_empty_buffer() -> None:
    feed = Feed(stand_in_app(), maxsize=10)
    # No fold has asked for a record yet.
    assert feed.idle_since is None
    events = feed.events()
    waiting = await waiting_for_next(events)
    assert not waiting.done() and feed.idle_since is not None
    await feed.deliver([message(0), message(1)])
    assert (await waiting).message.offset == 0
    assert feed.idle_since is None
    # The second record was in the buffer: taken with no wait, the fold never idle in between.
    assert (await anext(events)).message.offset == 1
    assert feed.idle_since is None
    waiting = await waiting_for_next(events)
    assert not waiting.done() and feed.idle_since is not None
    waiting.cancel()
