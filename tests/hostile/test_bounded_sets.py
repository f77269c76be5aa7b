"""Bounded sets: what a worker or the alerting role keeps in memory per alert, fact or edge has a bound, and
the answer stays right past it.

On the old code the alerting role kept every alert id with a delivery record, every (alert, channel,
destination) and every hung-up alert in sets that only grew: a year of alerts, all in memory, read again
from the deliveries topic at each start. A worker kept a connection to every edge address it ever answered
(each edge start listens on a new port), and the ids of its own facts until they were read back, for ever
if one never was. Each is fed more distinct keys than its bound here: the size stays exactly at the bound,
nothing is done twice, and what is new is still done.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import orjson
import pytest
from aiokafka import TopicPartition
from cryptography.fernet import Fernet

from alerting.service import Alerting
from domain.alerts import Alert
from domain.features import FeatureView
from domain.seen import Seen
from domain.store import MemoryStore
from domain.times import format_ms
from infra import frames
from infra.control import Generation
from infra.settings import Settings, load_settings
from processors.output.replies import ReplyChannels
from processors.state import mirror as mirror_module
from processors.state.mirror import FactMirror
from tests.test_mirror import block

BOUND = 50
T0 = 1_800_000_000_000
SECOND = 1_000


def alert_id(i: int) -> str:
    return f"alrt_{i:020d}"


def test_seen_keeps_exactly_its_bound_and_never_calls_a_forgotten_key_new() -> None:
    seen: Seen[str] = Seen(BOUND)
    for i in range(3 * BOUND):
        seen.add(alert_id(i), T0 + i * SECOND)
        assert len(seen) == min(i + 1, BOUND)
    # The newest are kept, the oldest forgotten: and every key added, kept or not, is still seen.
    assert [alert_id(i) in seen for i in (0, 2 * BOUND - 1, 2 * BOUND, 3 * BOUND - 1)] == [False, False, True, True]
    assert all(seen.seen(alert_id(i), T0 + i * SECOND) for i in range(3 * BOUND))
    assert seen.floor == T0 + (2 * BOUND - 1) * SECOND
    # A key newer than the floor is new; one as old as a forgotten key counts as seen (stale), as at most
    # once needs: it may have been one of them.
    assert not seen.seen("alrt_new", T0 + 3 * BOUND * SECOND)
    assert seen.seen("alrt_never_seen", T0)
    # A stale key is not kept: the size stays at the bound.
    seen.add("alrt_late", T0)
    assert len(seen) == BOUND


def test_seen_forgets_the_oldest_by_event_time_not_by_arrival() -> None:
    seen: Seen[str] = Seen(3)
    for key, at in (("c", 30), ("a", 10), ("d", 40), ("b", 20)):
        seen.add(key, at)
    assert (sorted(k for k in "abcd" if k in seen), seen.floor) == (["b", "c", "d"], 10)
    # A late key older than every one kept is the one forgotten: still seen, by the floor.
    seen.add("e", 15)
    assert (sorted(k for k in "abcde" if k in seen), seen.floor, seen.seen("e", 15)) == (["b", "c", "d"], 15, True)
    seen.add("f", 50)
    assert (sorted(k for k in "abcdef" if k in seen), seen.floor) == (["c", "d", "f"], 20)


class Recorded(Alerting):
    """The alerting role, its records kept here instead of appended to the deliveries topic."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.written: list[dict[str, Any]] = []
        self.ledger.producer = self

    async def send_and_wait(self, topic: str, value: bytes, key: bytes) -> None:
        """The ledger's producer: each record as it would be appended."""
        self.written.append(orjson.loads(value))


@pytest.fixture
async def alerting() -> AsyncIterator[Recorded]:
    """The alerting role's object, its sets bounded at `BOUND`."""
    # A key of its own: the default key file is the working directory's `data/`, which only a `run` makes.
    key = Fernet.generate_key().decode()
    role = Recorded(load_settings({"CALLSCREEN_ALERTING_SEEN_MAX": str(BOUND), "CALLSCREEN_SECRET_KEY": key}))
    yield role
    await role.producer.stop()


def alert(i: int, **fields: Any) -> Alert:
    record = {
        "id": alert_id(i),
        "type": "caller.rate_exceeded",
        "account_id": "acct_0000000000000001",
        "severity": "threat",
        "subject": "+14155552671",
        "created_at": format_ms(T0 + i * SECOND),
        "data": {"number": "+14155552671"},
        **fields,
    }
    return msgspec.convert(record, Alert)


async def test_the_alerting_roles_sets_stay_at_their_bound_and_nothing_is_handled_twice(alerting: Recorded) -> None:
    role, partition = alerting, TopicPartition("alerts", 0)
    role.ledger.owned.add(partition)
    # A deliveries topic three bounds long, read back at start: attempts, messages and hang-ups.
    for i in range(3 * BOUND):
        base = {"alert_id": alert_id(i), "account_id": "acct_0000000000000001", "at": T0 + i * SECOND + 500}
        created_at = format_ms(T0 + i * SECOND)
        role.intake.fold({**base, "kind": "delivery.attempt", "created_at": created_at})
        role.intake.fold(
            {**base, "kind": "channel.attempt", "channel": "email", "to": "a@example.com", "created_at": created_at}
        )
        role.intake.fold({**base, "kind": "hangup.attempt", "call_sid": f"CA{i}"})
    assert (len(role.webhooks.handled), len(role.channels.sent), len(role.hang_ups.hung_up)) == (BOUND, BOUND, BOUND)
    # Every alert read again, the forgotten ones included, is neither delivered nor hung up again.
    for offset in range(3 * BOUND):
        role.intake.take(partition, offset, alert(offset, hang_up=f"CA{offset}"))
    await asyncio.sleep(0)
    tasks = role.webhooks.tasks | role.channels.tasks | role.hang_ups.tasks
    assert (role.written, role.webhooks.queued, tasks) == ([], set(), set())
    assert role.ledger.reading.committable(partition) == 3 * BOUND
    # A new alert is still handled, once: its account has no webhook URL, so it is skipped on record.
    role.intake.take(partition, 3 * BOUND, alert(3 * BOUND))
    role.intake.take(partition, 3 * BOUND + 1, alert(3 * BOUND))
    await asyncio.gather(*role.ledger.writes)
    assert [(r["alert_id"], r["kind"], r["reason"]) for r in role.written] == [
        (alert_id(3 * BOUND), "delivery.skipped", "no_webhook_url")
    ]
    assert len(role.webhooks.handled) == BOUND
    assert role.ledger.reading.committable(partition) == 3 * BOUND + 2


class CountingView(FeatureView):
    """The view, noting each fact it is asked to apply."""

    def __init__(self) -> None:
        self.memory = MemoryStore()
        super().__init__(self.memory, load_settings({}).rules.scoring)
        self.applied: list[str] = []

    def apply(self, fact: Any) -> bool:
        self.applied.append(fact.id)
        return super().apply(fact)


def test_the_mirror_keeps_its_own_unread_ids_at_their_bound_and_a_forgotten_one_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(mirror_module, "OWN_UNREAD_KEEP", BOUND)
    view = CountingView()
    mirror = FactMirror(load_settings({}), view, Generation(), lambda: True)
    facts = [block(i) for i in range(3 * BOUND)]
    for n, fact in enumerate(facts, 1):
        mirror.own(fact)
        assert len(mirror._own_unread) == min(n, BOUND)
    before = dict(view.memory.data)
    view.applied.clear()
    for fact in facts:
        mirror.apply(mirror.decisions, msgspec.json.encode(fact))
    # The forgotten ids are applied again, and change nothing; the kept ones are only ticked off.
    assert view.applied == [f.id for f in facts[: 2 * BOUND]]
    assert view.memory.data == before
    assert len(mirror._own_unread) == 0


async def test_a_worker_keeps_connections_to_at_most_its_bound_of_edges_and_answers_every_one() -> None:
    keep = 4
    heard: dict[int, list[str]] = {}

    async def edge(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """An edge's reply listener: the answers it gets, by the port it listens on."""
        got = heard.setdefault(writer.get_extra_info("sockname")[1], [])
        with contextlib.suppress(asyncio.IncompleteReadError):
            while True:
                message = await frames.read(reader)
                if "corr" in message:
                    got.append(message["corr"])
        writer.close()

    channels = ReplyChannels("token", keep=keep)
    async with contextlib.AsyncExitStack() as stack:
        ports = []
        for _ in range(3 * keep):
            server = await asyncio.start_server(edge, "127.0.0.1", 0)
            stack.push_async_callback(server.wait_closed)
            stack.callback(server.close)
            ports.append(server.sockets[0].getsockname()[1])
        for n, port in enumerate(ports, 1):
            assert await channels.send(f"127.0.0.1:{port}", {"corr": str(port), "status": 200})
            assert len(channels.writers) == min(n, keep)
        # The most recently used are kept; an edge whose connection was let go is answered on a new one.
        assert list(channels.writers) == [f"127.0.0.1:{p}" for p in ports[-keep:]]
        assert await channels.send(f"127.0.0.1:{ports[0]}", {"corr": "again", "status": 200})
        assert len(channels.writers) == keep
        for writer in channels.writers.values():
            writer.close()
        await asyncio.sleep(0.1)
    assert heard == {port: [str(port), "again"] if port == ports[0] else [str(port)] for port in ports}
