"""The service's domain in memory: the folds the workers run, without Kafka, Faust or RocksDB.

`Harness` takes request bodies as the edge does (validation, stamps), folds each event into its
call, applies the facts to a feature view and the detectors in the order the workers apply them,
and keeps the alerts. Scenario files (tests/scenarios/*.yaml: events at explicit offsets, expected
answers and alerts) run through it in milliseconds, and a few of them also through the real
pipeline (tests/test_scenarios_pipeline.py), which must give the same answers.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import yaml

from domain import calls, detectors, features, index, keys, queries
from domain.alerts import Alert
from domain.calls import CallState, Stored
from domain.detectors import Echo, NumberWindow
from domain.events import AnyEvent, Tick
from domain.facts import Fact, NumberTick
from domain.features import FeatureView
from domain.ids import derived_event_id, deterministic_id
from domain.index import AlertEntry, CallEntry
from domain.rules import Rules
from domain.store import MemoryStore
from domain.times import format_ms, parse_ms
from domain.validation import InputError, Stamp, TimeBounds, parse_event
from infra.kafka import partition_for

SCENARIOS = Path(__file__).parent / "scenarios"
# Scenario times are offsets from this moment, unless a run names another (the pipeline's is recent).
BASE = parse_ms("2026-01-05T10:00:00.000Z") or 0


@dataclass(frozen=True)
class Account:
    id: str
    plan: str = "guard"
    trusted: frozenset[str] = frozenset()
    # What its posts come with: an API key (`key`), or a path token (`ingest`, `gate`).
    credential: str = "key"


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
        self.number_due: dict[str, int] = {}
        self.alerts: list[Alert] = []
        # What the call folds made, before any detector saw it.
        self.folded_facts: list[Fact] = []
        self.folded_alerts: list[Alert] = []
        self._ids = itertools.count()

    def post(self, account: Account, body: dict[str, Any], received_at: int) -> tuple[int, Any]:
        """What the edge answers a POST of `body` (as the worker's fold would answer it)."""
        stamp = Stamp(
            f"{next(self._ids):032x}", account.id, account.plan, received_at, account.trusted, account.credential
        )
        try:
            event = parse_event(body, stamp, TimeBounds.of(self.rules.limits))
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
            listed = calls.listing_entry(state, event, outcome)
            if listed is not None:
                self.index_call(key, listed)
            if outcome.forward is None:
                break
            key = keys.call(event.account_id, outcome.forward)
        self.folded_facts += outcome.facts
        self.folded_alerts += outcome.alerts
        self.record(outcome.facts, outcome.alerts)
        return outcome.status, as_sent(outcome.body)

    def index_call(self, key: str, entry: CallEntry) -> None:
        partition = partition_for(key, self.partitions)
        self.tables.update(index.additions(self.tables.get, "calls", keys.split_call(key)[0], partition, entry))

    def store_alerts(self, alerts: list[Alert]) -> None:
        for alert in alerts:
            self.alerts.append(alert)
            self.tables[keys.alert(alert.account_id, alert.id)] = alert
            entry = AlertEntry(parse_ms(alert.created_at) or 0, alert.id, alert.type)
            partition = partition_for(alert.account_id, self.partitions)
            self.tables.update(index.additions(self.tables.get, "alerts", alert.account_id, partition, entry))

    def reads(self) -> queries.Reads:
        """What a worker's read agent reads, here."""
        scan = scan_of(self.tables)
        return queries.Reads(self.view, self.calls.get, scan, self.tables.get, scan)

    def record(self, facts: list[Fact], alerts: list[Alert]) -> None:
        """Facts reach the view and the detectors in the order they were appended, consequences after."""
        self.store_alerts(alerts)
        queue = list(facts)
        while queue:
            fact = queue.pop(0)
            self.view.apply(fact)
            number_key = keys.number(fact.account_id, fact.number)
            observed = observe_number(self.windows, self.echoes, number_key, fact, self.rules)
            due = detectors.sweep_due(observed.window, fact.at)
            if due is None:
                self.number_due.pop(number_key, None)
            else:
                self.number_due[number_key] = due
            self.store_alerts(observed.alerts)
            queue += observed.facts

    def echoes_of(self, number_key: str) -> Callable[[str], Echo | None]:
        return echo_reader(self.echoes, number_key)

    def sweep(self, now: int) -> None:
        """What the workers' sweeps append at `now`: a tick, at its due time, for every call and number that is due."""
        for key, state in list(self.calls.items()):
            if not isinstance(state, CallState):
                continue
            due = calls.sweep_due(state, self.rules)
            if due is not None and calls.tick_after(state, due) <= now:
                account, call_id = keys.split_call(key)
                tick_id = derived_event_id("tick", key, str(due))
                self.fold(Tick(id=tick_id, account_id=account, call_id=call_id, at=due))
        for number_key, due in list(self.number_due.items()):
            if detectors.tick_after(self.windows[number_key], due) <= now:
                account, number = number_key.split(":", 1)
                tick = NumberTick(
                    id=derived_event_id("tick", number_key, str(due)), account_id=account, number=number, at=due
                )
                self.record([tick], [])


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


@dataclass
class Step:
    at: int
    account: str = "a"
    post: dict[str, Any] | None = None
    expect: dict[str, Any] | None = None
    sweep: bool = False
    # When the edge received it, if not at its `at` (a late report).
    received: int | None = None


@dataclass
class Scenario:
    name: str
    description: str
    accounts: dict[str, dict[str, Any]]
    steps: list[Step]
    alerts: list[dict[str, Any]] | None
    pipeline: bool
    rules: Rules = field(default_factory=Rules)

    def account(self, alias: str) -> Account:
        spec = self.accounts.get(alias, {})
        return Account(
            deterministic_id("acct_", 16, "scenario", self.name, alias),
            spec.get("plan", "guard"),
            frozenset(spec.get("trusted", [])),
        )


def offset_ms(text: str | int) -> int:
    """`90s`, `10m`, `2m5s`, `1h`, `1d` or plain milliseconds."""
    if isinstance(text, int):
        return text
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not an offset: {text!r}")
    units = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
    return sum(round(float(n) * units[u]) for n, u in parts)


def load(path: Path) -> Scenario:
    data = yaml.safe_load(path.read_text())
    steps = []
    for raw in data["steps"]:
        if "sweep" in raw:
            steps.append(Step(at=offset_ms(raw["sweep"]), sweep=True))
        else:
            received = offset_ms(raw["received"]) if "received" in raw else None
            at = offset_ms(raw.get("at", 0))
            steps.append(Step(at, raw.get("as", "a"), raw["post"], raw.get("expect"), received=received))
    return Scenario(
        name=path.stem,
        description=data.get("description", ""),
        accounts=data.get("accounts", {"a": {}}),
        steps=steps,
        alerts=data.get("alerts"),
        pipeline=bool(data.get("pipeline", False)),
        rules=with_overrides(Rules(), data.get("rules", {})),
    )


def with_overrides(rules: Rules, overrides: dict[str, dict[str, Any]]) -> Rules:
    """`rules:` in a scenario: a few rules changed so a scenario stays short (the harness only)."""
    concerns = {name: dataclasses.replace(getattr(rules, name), **values) for name, values in overrides.items()}
    return dataclasses.replace(rules, **concerns)


def scenarios() -> list[Scenario]:
    return [load(path) for path in sorted(SCENARIOS.glob("*.yaml"))]


def body_at(step: Step, base: int) -> dict[str, Any]:
    """The step's body with its `at` (unless it gives its own or says `at: null`) from the base."""
    assert step.post is not None
    body = dict(step.post)
    if "at" not in body:
        body["at"] = format_ms(base + step.at)
    elif body["at"] is None:
        del body["at"]
    return body


@dataclass
class Run:
    answers: list[tuple[int, Any]] = field(default_factory=list)
    alerts: list[dict[str, Any]] = field(default_factory=list)


def received_at(step: Step, base: int) -> int:
    return base + (step.received if step.received is not None else step.at)


def run(scenario: Scenario, base: int = BASE) -> Run:
    harness = Harness(scenario.rules)
    result = Run()
    for step in scenario.steps:
        if step.sweep:
            harness.sweep(base + step.at)
            continue
        answer = harness.post(scenario.account(step.account), body_at(step, base), received_at(step, base))
        result.answers.append(answer)
    result.alerts = [as_sent(a) for a in harness.alerts]
    return result


def subset(expected: Any, actual: Any, where: str = "") -> list[str]:
    """How `actual` differs from `expected`, where dicts in `expected` name only the keys they check."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{where}: expected an object, got {actual!r}"]
        wrong = []
        for key, value in expected.items():
            if value == "absent":
                if key in actual:
                    wrong.append(f"{where}.{key}: expected absent, got {actual[key]!r}")
            elif key not in actual:
                wrong.append(f"{where}.{key}: missing")
            else:
                wrong += subset(value, actual[key], f"{where}.{key}")
        return wrong
    return [] if expected == actual else [f"{where}: expected {expected!r}, got {actual!r}"]


def check(scenario: Scenario, result: Run, base: int = BASE) -> list[str]:
    """Every way a run missed the scenario's expectations."""
    wrong = []
    posts = [s for s in scenario.steps if not s.sweep]
    for number, (step, (status, body)) in enumerate(zip(posts, result.answers, strict=True)):
        if step.expect is not None:
            wrong += subset(step.expect, {"status": status, "body": body}, f"step {number + 1}")
    if scenario.alerts is not None:
        if len(result.alerts) != len(scenario.alerts):
            wrong.append(f"alerts: expected {len(scenario.alerts)}, got {[a['type'] for a in result.alerts]}")
        for expected, got in zip(scenario.alerts, result.alerts, strict=False):
            if "created_at" in expected:
                expected = {**expected, "created_at": format_ms(base + offset_ms(expected["created_at"]))}
            wrong += subset(expected, got, f"alert {expected.get('type')}")
    return wrong
