"""Scenario files (tests/scenarios/*.yaml: events at explicit offsets, expected answers and alerts), run
through the folds in memory (`callscreen.testing.Harness`) in milliseconds, and a few of them also through
the real pipeline (tests/test_scenarios_pipeline.py), which must give the same answers.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from callscreen.testing import Account, Harness, as_sent
from domain.ids import deterministic_id
from domain.rules import Rules
from domain.times import format_ms, parse_ms

SCENARIOS = Path(__file__).parent / "scenarios"
# Scenario times are offsets from this moment, unless a run names another (the pipeline's is recent).
BASE = parse_ms("2026-01-05T10:00:00.000Z") or 0


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
