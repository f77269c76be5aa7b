"""The feature view's per-number values on plain data: what a start reads and rewrites stays bounded."""

from __future__ import annotations

from domain import keys, queries
from domain.facts import CallDecided
from domain.features import FeatureView
from domain.rules import HOUR_MS, ScoringRules
from domain.store import MemoryStore
from tests.facts import ACCOUNT, NUMBER, call_decided

T0 = 1_700_000_000_000 - 1_700_000_000_000 % HOUR_MS


def decided(n: int, at: int, account: str = ACCOUNT, caller: str = "+12125550123") -> CallDecided:
    return call_decided(n, at, caller, account_id=account)


def test_a_number_called_every_hour_for_three_days_keeps_two_days_of_counts() -> None:
    view = FeatureView(MemoryStore(), ScoringRules())
    for hour in range(72):
        assert view.apply(decided(hour, T0 + hour * HOUR_MS + 60_000))
    hours = view.store.get(keys.View.hours(ACCOUNT, NUMBER))
    assert sorted(int(h) for h in hours) == [T0 + hour * HOUR_MS for hour in range(24, 72)]
    now = T0 + 71 * HOUR_MS + 120_000
    # The 25 hours that end in the current one, as GET /v1/numbers has always counted them.
    assert queries.numbers(view, ACCOUNT, now, 5)["data"][0]["calls_24h"] == 25


def test_a_caller_counts_each_account_it_reached_once_and_keeps_no_list() -> None:
    view = FeatureView(MemoryStore(), ScoringRules())
    for n, account in enumerate(["acct_a", "acct_b", "acct_a", "acct_c"]):
        assert view.apply(decided(n, T0 + n, account))
    assert not view.apply(decided(1, T0 + 1, "acct_b"))
    assert view.caller("+12125550123")[2] == 3
    assert view.store.get(keys.View.accounts("+12125550123")) is None
    assert view.caller("+12125550199")[2] == 0


def test_a_view_folded_with_the_list_counts_on_from_it_and_drops_the_list() -> None:
    store = MemoryStore()
    caller = "+12125550123"
    # What a view kept before the count: the history without it, and the list beside it.
    history = {"calls": 2, "good": 0, "bad": 0, "points": 0, "settled": None, "start": None, "first": T0}
    store.put(keys.View.history(caller), history)
    store.put(keys.View.accounts(caller), ["acct_a", "acct_b"])
    view = FeatureView(store, ScoringRules())
    assert view.caller(caller)[2] == 2
    assert view.apply(decided(10, T0 + 10, "acct_b"))
    assert view.caller(caller)[2] == 2
    assert store.get(keys.View.accounts(caller)) is None
    assert view.apply(decided(11, T0 + 11, "acct_c"))
    assert view.caller(caller)[2] == 3
    assert view.store.get(keys.View.history(caller))["calls"] == 4
