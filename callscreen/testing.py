"""Callscreen's folds in memory, for tests and benchmarks: the service without Kafka, Faust or RocksDB.

`Harness` takes request bodies as the edge does (validation, stamps), folds each event into its call,
writes what each outcome says (the row, the listing's entry, the due times, the hot-table horizon), applies
the facts to a feature view and the detectors in the order the workers apply them, and keeps the alerts.
`MemoryLog` puts it behind the edge in place of the broker and the workers, for tests of the edge alone:
what it validates, authenticates, limits and answers. The pipeline tests run the same folds through the
real broker and workers, and must give the same answers (tests/test_scenarios_pipeline.py).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from domain import calls, detectors, features, horizon, index, keys, queries
from domain.alerts import Alert
from domain.calls import Stored
from domain.detectors import Echo, NumberWindow
from domain.due import Due
from domain.events import AnyEvent, Tick, decode_event
from domain.facts import Fact, NumberTick
from domain.features import FeatureView
from domain.ids import derived_event_id
from domain.index import AlertEntry, CallEntry
from domain.outbound import Outbound
from domain.policy import Policy
from domain.rules import Rules
from domain.store import MemoryStore
from domain.times import parse_ms
from domain.validation import InputError, Stamp, TimeBounds, parse_event, parse_label
from infra.kafka import partition_for
from infra.settings import Settings
from ingest.log import Fold, LogUnavailable


@dataclass(frozen=True)
class Account:
    id: str
    plan: str = "guard"
    trusted: frozenset[str] = frozenset()
    # What its posts come with: an API key (`key`), or a path token (`ingest`, `gate`).
    credential: str = "key"
    policy: Policy | None = None
    outbound: Outbound | None = None


def as_sent(value: Any) -> Any:
    """`value` as JSON carries it to the edge and the alert topic: a struct's tuples are arrays there."""
    return msgspec.json.decode(msgspec.json.encode(value))


class Harness:
    def __init__(self, rules: Rules | None = None, partitions: int = 4) -> None:
        self.rules = rules or Rules()
        self.partitions = partitions
        self.view = FeatureView(MemoryStore(), self.rules.scoring)
        self.calls: dict[str, Stored] = {}
        # The listing indexes and the alert store, keyed as the workers' tables are.
        self.tables: dict[str, Any] = {}
        self.windows: dict[str, NumberWindow] = {}
        self.echoes: dict[str, Echo] = {}
        # When the sweeps tick each open call and each number in a spike, as the folds' outcomes say.
        self.call_due: dict[str, Due] = {}
        self.number_due: dict[str, Due] = {}
        self.alerts: list[Alert] = []
        # What the call folds made, before any detector saw it.
        self.folded_facts: list[Fact] = []
        self.folded_alerts: list[Alert] = []
        self._ids = itertools.count()

    def post(self, account: Account, body: dict[str, Any], received_at: int) -> tuple[int, Any]:
        """What the edge answers a POST of `body` (as the worker's fold would answer it)."""
        stamp = Stamp(
            f"{next(self._ids):032x}",
            account.id,
            account.plan,
            received_at,
            account.trusted,
            account.credential,
            account.policy,
            account.outbound,
        )
        try:
            event = parse_event(body, stamp, TimeBounds.of(self.rules.limits))
        except InputError as refused:
            return refused.status, {"error": refused.code, **refused.context}
        return self.fold(event)

    def label(self, account: Account, call_id: str, body: dict[str, Any], received_at: int) -> tuple[int, Any]:
        """What the edge answers `POST /v1/calls/<call_id>/label` with `body`."""
        stamp = Stamp(f"{next(self._ids):032x}", account.id, account.plan, received_at, account.trusted)
        try:
            event = parse_label(body, stamp, call_id)
        except InputError as refused:
            return refused.status, {"error": refused.code, **refused.context}
        return self.fold(event)

    def fold(self, event: AnyEvent) -> tuple[int, Any]:
        key = keys.call(event.account_id, event.call_id)
        while True:
            state = self.calls.get(key)
            outcome = calls.fold(state, event, features.context(self.view, state, event, self.rules), self.rules)
            if outcome.state is not None:
                self.calls[key] = outcome.state
            if outcome.listed is not None:
                self.index_call(key, outcome.listed)
            self.set_due(self.call_due, key, outcome.due)
            self.leave_horizon(key, event.at)
            if outcome.forward is None:
                break
            key = keys.call(event.account_id, outcome.forward)
        self.folded_facts += outcome.facts
        self.folded_alerts += outcome.alerts
        self.record(outcome.facts, outcome.alerts)
        return outcome.status, as_sent(outcome.body)

    @staticmethod
    def set_due(table: dict[str, Due], key: str, due: Due | None) -> None:
        if due is None:
            table.pop(key, None)
        else:
            table[key] = due

    def leave_horizon(self, key: str, at: int) -> None:
        """Calls past the hot-table horizon at `at` leave, as a worker's calls fold takes them out."""
        partition = partition_for(key, self.partitions)
        eviction = horizon.evict(scan_of(self.tables), "calls", partition, at, self.rules.limits.hot_days)
        if eviction is None:
            return
        self.apply(eviction.writes)
        for call_id in eviction.items:
            gone = keys.call(eviction.account, call_id)
            self.calls.pop(gone, None)
            self.call_due.pop(gone, None)

    def apply(self, writes: dict[str, Any]) -> None:
        for key, value in writes.items():
            if value is None:
                self.tables.pop(key, None)
            else:
                self.tables[key] = value

    def index_call(self, key: str, entry: CallEntry) -> None:
        account, partition = keys.split_call(key)[0], partition_for(key, self.partitions)
        self.apply(index.additions(self.tables.get, "calls", account, partition, entry))
        self.apply(horizon.track(self.tables.get, "calls", account, partition, entry.at))

    def store_alerts(self, alerts: list[Alert]) -> None:
        for alert in alerts:
            self.alerts.append(alert)
            self.tables[keys.alert(alert.account_id, alert.id)] = alert
            entry = AlertEntry(parse_ms(alert.created_at) or 0, alert.id, alert.type)
            partition = partition_for(alert.account_id, self.partitions)
            self.tables.update(index.additions(self.tables.get, "alerts", alert.account_id, partition, entry))

    def reads(self, scan_max_rows: int | None = None) -> queries.Reads:
        """What a worker's read agent reads, here, at most `scan_max_rows` index rows a listing."""
        scan = scan_of(self.tables)
        return queries.Reads(self.view, self.calls.get, scan, self.tables.get, scan, scan_max_rows)

    def record(self, facts: list[Fact], alerts: list[Alert]) -> None:
        """Facts reach the view and the detectors in the order they were appended, consequences after."""
        self.store_alerts(alerts)
        queue = list(facts)
        while queue:
            fact = queue.pop(0)
            self.view.apply(fact)
            number_key = keys.number(fact.account_id, fact.number)
            observed = observe_number(self.windows, self.echoes, number_key, fact, self.rules)
            self.set_due(self.number_due, number_key, observed.due)
            self.store_alerts(observed.alerts)
            queue += observed.facts

    def echoes_of(self, number_key: str) -> Callable[[str], Echo | None]:
        return echo_reader(self.echoes, number_key)

    def sweep(self, now: int) -> None:
        """What the workers' sweeps append at `now`: a tick, at its due time, for every call and number that is due."""
        # In the order the calls came.
        for key in list(self.calls):
            due = self.call_due.get(key)
            if due is not None and due.tick_after <= now:
                account, call_id = keys.split_call(key)
                tick_id = derived_event_id("tick", key, str(due.at))
                self.fold(Tick(id=tick_id, account_id=account, call_id=call_id, at=due.at))
        for number_key, due in list(self.number_due.items()):
            if due.tick_after <= now:
                account, number = number_key.split(":", 1)
                tick_id = derived_event_id("tick", number_key, str(due.at))
                self.record([NumberTick(id=tick_id, account_id=account, number=number, at=due.at)], [])


def scan_of(table: dict[str, Any]) -> index.Scan:
    """A range read of a table kept in a dict, as a worker's RocksDB answers it: keys in order, or reversed."""

    def scan(low: str, high: str, backwards: bool = False) -> Iterator[tuple[str, Any]]:
        for key in sorted((key for key in table if low <= key < high), reverse=backwards):
            yield key, table[key]

    return scan


@dataclass
class Detected:
    alerts: list[Alert] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)


def detect_in_order(facts: Sequence[tuple[str, Fact]], rules: Rules) -> Detected:
    """What the detector agent makes of (number key, fact) pairs in the order a decisions partition holds
    them, duplicates included: across partitions that order is the workers', which no plain fold foresees."""
    windows: dict[str, NumberWindow] = {}
    echoes: dict[str, Echo] = {}
    detected = Detected()
    for number_key, fact in facts:
        observed = observe_number(windows, echoes, number_key, fact, rules)
        detected.alerts += observed.alerts
        detected.facts += observed.facts
    return detected


def observe_number(
    windows: dict[str, NumberWindow], echoes: dict[str, Echo], number_key: str, fact: Fact, rules: Rules
) -> detectors.Observed:
    """One fact through the number's detectors, its window and echoes kept as the detector agent keeps them."""
    observed = detectors.observe(
        windows.get(number_key, NumberWindow()), fact, rules.detectors, rules.scoring, echo_reader(echoes, number_key)
    )
    windows[number_key] = observed.window
    if observed.echo is not None:
        echoes[keys.echo(number_key, fact.id)] = observed.echo
    for forgotten in observed.forgotten:
        del echoes[keys.echo(number_key, forgotten)]
    return observed


def echo_reader(echoes: dict[str, Echo], number_key: str) -> Callable[[str], Echo | None]:
    return lambda fact_id: echoes.get(keys.echo(number_key, fact_id))


class MemoryLog:
    edge_id = "memory-edge"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.harness = Harness(settings.rules, settings.partitions)
        self.records: list[tuple[str, str, Any]] = []
        self.on_account: Fold = lambda record: None
        self.on_status: Fold = lambda record: None
        self.refusing = False
        self.silent_worker = False
        self.follower_dead = False
        self._beat: asyncio.Task[None] | None = None

    async def start(self, on_account: Fold, on_status: Fold) -> None:
        self.on_account, self.on_status = on_account, on_status
        self._beat = asyncio.create_task(self._beat_as_a_worker())

    async def _beat_as_a_worker(self) -> None:
        """A ready worker holding every partition, as a real one's heartbeats say."""
        while True:
            if not self.silent_worker:
                partitions = list(range(self.settings.partitions))
                beat = {"kind": "worker.heartbeat", "worker": "memory", "partitions": partitions, "ready": True}
                self.on_status({**beat, "sent_at": time.time()})
            await asyncio.sleep(0.5)

    async def stop(self) -> None:
        if self._beat is not None:
            self._beat.cancel()

    async def append(self, topic: str, key: str, value: bytes) -> None:
        if self.refusing:
            raise LogUnavailable("refusing")
        record = msgspec.json.decode(value)
        self.records.append((topic, key, record))
        if topic == self.settings.topic("accounts"):
            self.on_account(record)

    async def ask(self, topic: str, key: str, value: bytes, partition: int | None) -> asyncio.Future[dict[str, Any]]:
        if self.refusing:
            raise LogUnavailable("refusing")
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        if self.silent_worker:
            return answer
        if topic == self.settings.topic("events"):
            status, body = self.harness.fold(decode_event(value))
        else:
            question = queries.decode_question(value)
            reads = self.harness.reads(self.settings.query_scan_max_rows)
            status, body = queries.answer(question, partition or 0, reads, self.settings.rules)
        answer.set_result({"status": status, "body": msgspec.to_builtins(body)})
        return answer

    def following(self) -> bool:
        return not self.follower_dead

    def forget(self, answer: asyncio.Future[dict[str, Any]]) -> None:
        answer.cancel()
