"""The scenario files marked `pipeline: true`, through the real edge, Kafka and workers: every answer
and every alert the same as the pure folds give (tests/harness.py) for the same times."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from callscreen.admin import Admin
from domain.rules import HOUR_MS, MIN_MS
from infra.clock import now_ms
from tests.harness import Run, Scenario, body_at, check, run, scenarios
from tests.service import AccountKeys, RunningService, create_account, settled

PIPELINE = [s for s in scenarios() if s.pipeline]
# A pipeline scenario ends every call well within the long-call ceiling (30 minutes).
LONGEST_SPAN_MS = 25 * MIN_MS


async def accounts_of(scenario: Scenario, service: RunningService, http: aiohttp.ClientSession) -> dict[str, Any]:
    made: dict[str, AccountKeys] = {}
    for alias in scenario.accounts:
        account = scenario.account(alias)
        keys = await create_account(service.settings, http, service.base_url, account.plan, account.id)
        async with Admin(service.settings) as admin:
            for number in sorted(account.trusted):
                await admin.trusted("add", account.id, number)
        made[alias] = keys
    return made


def recent_base(scenario: Scenario) -> tuple[int, Run]:
    """The scenario's start, and the pure folds' run from it: its last step a minute ago, so no tick lands
    among the steps (a sweep ticks a call once as much of the edge's time has passed since its latest event
    as its rule is due after it, `domain.calls.tick_after`: tens of seconds at least in these scenarios);
    or, where that would split the scenario's hourly windows (a spend ceiling summed over two hours is not
    reached), its last step a minute before the top of the hour."""
    span = max(step.at for step in scenario.steps)
    assert span < LONGEST_SPAN_MS, f"{scenario.name} spans {span} ms"
    latest = now_ms() - span - MIN_MS
    latest -= latest % MIN_MS
    before_the_hour = latest + span - (latest + span) % HOUR_MS - span - MIN_MS
    for base in (latest, before_the_hour):
        folds = run(scenario, base)
        if not check(scenario, folds, base):
            return base, folds
    raise AssertionError(f"the folds do not meet {scenario.name} at either start")


def comparable(alerts: list[dict[str, Any]]) -> list[tuple[str, str, str, Any]]:
    """What must match: id (so subject and window), type, severity, data; not the receipt time."""
    return sorted((a["id"], a["type"], a["severity"], a["data"]) for a in alerts)


@pytest.mark.parametrize("scenario", PIPELINE, ids=lambda s: s.name)
async def test_the_pipeline_answers_as_the_folds_do(
    scenario: Scenario, service: RunningService, http: aiohttp.ClientSession
) -> None:
    assert not any(step.sweep or step.received is not None for step in scenario.steps), "pipeline scenarios run now"
    base, folds = recent_base(scenario)
    made = await accounts_of(scenario, service, http)
    answers = []
    for step in scenario.steps:
        account = made[step.account]
        async with http.post(f"{service.base_url}/v1/events", json=body_at(step, base), headers=account.headers) as r:
            answers.append((r.status, await r.json()))
    await settled(service.settings)
    alerts: list[dict[str, Any]] = []
    for account in made.values():
        async with http.get(f"{service.base_url}/v1/alerts?limit=200", headers=account.headers) as r:
            alerts += (await r.json())["data"]
    assert answers == folds.answers
    assert comparable(alerts) == comparable(folds.alerts)
    pipeline = Run(answers, sorted(alerts, key=lambda a: folds_order(a, folds)))
    assert check(scenario, pipeline, base) == []


def folds_order(alert: dict[str, Any], folds: Run) -> int:
    """The alerts in the order the folds raised them (the API lists them newest first)."""
    return [a["id"] for a in folds.alerts].index(alert["id"])
