"""The alert budget (domain.alert_budget): per account, per minute of the alerts' own creation time."""

from __future__ import annotations

from domain.alert_budget import KEEP_MS, MINUTE_MS, AlertBudget

T0 = 1_767_600_000_000


def decisions(budget: AlertBudget, account: str, times: list[int]) -> list[bool]:
    return [budget.admit(account, f"{account}-{i}", at) for i, at in enumerate(times)]


def test_past_the_limit_within_a_minute_of_creation_time() -> None:
    budget = AlertBudget(per_minute=3)
    assert decisions(budget, "a", [T0, T0 + 1, T0 + 2, T0 + 3, T0 + 59_999]) == [True, True, True, False, False]


def test_the_window_slides_with_the_alerts_own_time() -> None:
    budget = AlertBudget(per_minute=2)
    times = [T0, T0 + 30_000, T0 + 59_999, T0 + MINUTE_MS, T0 + 90_000, T0 + 90_001]
    assert decisions(budget, "a", times) == [True, True, False, True, True, False]


def test_accounts_have_budgets_of_their_own() -> None:
    budget = AlertBudget(per_minute=1)
    assert decisions(budget, "a", [T0, T0]) == [True, False]
    assert decisions(budget, "b", [T0]) == [True]


def test_the_same_alerts_in_the_same_order_decide_the_same() -> None:
    times = [T0 + (i * 7_919) % 120_000 for i in range(200)]
    first = decisions(AlertBudget(per_minute=10), "a", times)
    assert first == decisions(AlertBudget(per_minute=10), "a", times)
    assert first.count(True) < len(times)


def test_an_alert_read_again_is_admitted_again_and_counted_once() -> None:
    budget = AlertBudget(per_minute=2)
    assert budget.admit("a", "x", T0)
    assert budget.admit("a", "x", T0)
    assert budget.in_window("a", T0) == 1
    assert budget.admit("a", "y", T0)
    assert not budget.admit("a", "z", T0)


def test_alerts_admitted_elsewhere_count_here() -> None:
    budget = AlertBudget(per_minute=2)
    budget.note("a", "x", T0)
    budget.note("a", "y", T0 + 1)
    budget.note("a", "y", T0 + 1)
    assert budget.in_window("a", T0 + 1) == 2
    assert not budget.admit("a", "z", T0 + 2)
    assert budget.admit("a", "x", T0 + 2)


def test_old_alerts_are_forgotten_past_the_horizon() -> None:
    budget = AlertBudget(per_minute=1)
    budget.note("a", "old", T0)
    budget.note("a", "new", T0 + KEEP_MS + 1)
    assert budget.ids["a"] == {"new": T0 + KEEP_MS + 1}
    assert budget.times["a"] == [T0 + KEEP_MS + 1]
