"""The folds driven in memory: each event into its call, its facts into the feature view and the
number's detectors, in the order the workers apply them, with no Kafka, Faust or RocksDB.

`Replay` writes what each outcome says (the row, the due times and, unless told not to keep them, the
listing's entry, the hot-table horizon, the alerts and the facts). The tests' `callscreen.testing.Harness`
drives it with request bodies; the shadow role (`shadow/`) drives it with the log's own records, once as
they were and once with a candidate policy. The partitioner is given, not imported: it is Kafka's (infra),
and the listings and the horizon are kept per partition as a worker keeps them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from domain import calls, detectors, features, horizon, index, keys
from domain.alerts import Alert
from domain.calls import Outcome, Stored
from domain.detectors import Echo, NumberWindow
from domain.due import Due
from domain.events import AnyEvent, Tick
from domain.facts import Fact, NumberTick
from domain.features import FeatureView
from domain.ids import derived_event_id
from domain.index import AlertEntry, CallEntry
from domain.rules import Rules
from domain.store import MemoryStore
from domain.times import parse_ms

Partitioner = Callable[[str], int]


class Replay:
    def __init__(self, rules: Rules, partition: Partitioner, keep: bool = True) -> None:
        self.rules = rules
        self.partition = partition
        # What the tests read back: the listings and the horizon, every alert and every folded fact. A
        # replay of the log for a shadow run reads none of it, and would hold all of it in memory; the
        # horizon (`hot_days`) is longer than any window it compares.
        self.keep = keep
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

    def fold_event(self, event: AnyEvent, key: str | None = None, forwards: bool = True) -> Outcome:
        """One event through its call's fold (and the call it forwards to), its facts through the detectors.

        A replay of the log names the record's key and follows no forward: the log holds the forwarded
        copy the worker appended under its call's key, which comes to the replay in its turn."""
        key = key or keys.call(event.account_id, event.call_id)
        while True:
            state = self.calls.get(key)
            outcome = calls.fold(state, event, features.context(self.view, state, event, self.rules), self.rules)
            if outcome.state is not None:
                self.calls[key] = outcome.state
            if outcome.listed is not None and self.keep:
                self.index_call(key, outcome.listed)
            set_due(self.call_due, key, outcome.due)
            if self.keep:
                self.leave_horizon(key, event.at)
            if outcome.forward is None or not forwards:
                break
            key = keys.call(event.account_id, outcome.forward)
        if self.keep:
            self.folded_facts += outcome.facts
            self.folded_alerts += outcome.alerts
        self.record(outcome.facts, outcome.alerts)
        return outcome

    def leave_horizon(self, key: str, at: int) -> None:
        """Calls past the hot-table horizon at `at` leave, as a worker's calls fold takes them out."""
        eviction = horizon.evict(scan_of(self.tables), "calls", self.partition(key), at, self.rules.limits.hot_days)
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
        account, partition = keys.split_call(key)[0], self.partition(key)
        self.apply(index.additions(self.tables.get, "calls", account, partition, entry))
        self.apply(horizon.track(self.tables.get, "calls", account, partition, entry.at))

    def store_alerts(self, alerts: list[Alert]) -> None:
        if not self.keep:
            return
        for alert in alerts:
            self.alerts.append(alert)
            self.tables[keys.alert(alert.account_id, alert.id)] = alert
            entry = AlertEntry(parse_ms(alert.created_at) or 0, alert.id, alert.type)
            partition = self.partition(alert.account_id)
            self.tables.update(index.additions(self.tables.get, "alerts", alert.account_id, partition, entry))

    def record(self, facts: list[Fact], alerts: list[Alert]) -> None:
        """Facts reach the view and the detectors in the order they were appended, consequences after."""
        self.store_alerts(alerts)
        queue = list(facts)
        while queue:
            fact = queue.pop(0)
            self.view.apply(fact)
            number_key = keys.number(fact.account_id, fact.number)
            observed = observe_number(self.windows, self.echoes, number_key, fact, self.rules)
            set_due(self.number_due, number_key, observed.due)
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
                self.fold_event(Tick(id=tick_id, account_id=account, call_id=call_id, at=due.at))
        for number_key, due in list(self.number_due.items()):
            if due.tick_after <= now:
                account, number = number_key.split(":", 1)
                tick_id = derived_event_id("tick", number_key, str(due.at))
                self.record([NumberTick(id=tick_id, account_id=account, number=number, at=due.at)], [])


def set_due(table: dict[str, Due], key: str, due: Due | None) -> None:
    if due is None:
        table.pop(key, None)
    else:
        table[key] = due


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
