"""The facts mirror on the real broker: a worker folds no event before its view holds the log's facts."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import msgspec

from domain import keys
from domain.facts import BlockPlaced
from domain.features import FeatureView
from infra.control import Generation
from infra.kafka import ensure_topics, make_producer
from infra.settings import load_settings
from processors.state.mirror import FactMirror
from processors.state.rocks import RocksBudget, RocksStore
from tests.service import isolated

FACTS = 60
NUMBER = "+14155552671"


def block(i: int) -> BlockPlaced:
    caller = f"+1212555{i:04d}"
    return BlockPlaced(
        id=f"alrt_{i}:{caller}",
        account_id="acct_m",
        number=NUMBER,
        at=1_000,
        alert_id=f"alrt_{i}",
        caller=caller,
        reason="caller.rate_exceeded",
        since=1_000,
        until=3_601_000,
    )


async def test_the_mirror_is_caught_up_only_once_its_view_holds_every_fact_the_log_held_at_start(
    kafka: str, tmp_path: Path
) -> None:
    # A view that a crash left behind the log: the facts are in the topic, not in the view.
    settings = load_settings(isolated()).with_overrides(broker=kafka, data_dir=str(tmp_path))
    await ensure_topics(settings)
    facts = [block(i) for i in range(FACTS)]
    producer = make_producer(settings)
    await producer.start()
    try:
        for fact in facts:
            key = keys.number(fact.account_id, fact.number).encode()
            await producer.send(settings.topic("decisions"), msgspec.json.encode(fact), key=key)
        await producer.flush()
    finally:
        await producer.stop()
    view = FeatureView(RocksStore(tmp_path / "features", RocksBudget(8)), settings.rules.scoring)
    mirror = FactMirror(settings, view, Generation(), lambda: True)
    running = asyncio.create_task(mirror.run())
    try:
        await asyncio.wait_for(mirror.caught_up.wait(), 30)
        held = [view.block(f.account_id, f.number, f.caller, 2_000) for f in facts]
        assert [None if b is None else b.alert_id for b in held] == [f.alert_id for f in facts]
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
