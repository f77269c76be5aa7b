"""Time bounds: a live start is at most 7 days old, and a call that exists takes its later reports whatever
their age; quiet imports may be older and stay the account's own.

On older code a week-old start was scored, counted against the allowance and fed every account's view of
the caller; then a call that started yesterday could never end.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from domain.rules import DAY_MS, HOUR_MS
from domain.times import format_ms
from infra.clock import now_ms
from tests.service import AccountKeys, RunningService, create_account

TO = "+14155552671"
LATE = {"error": "invalid_at", "max_age_days": 7, "hint": "use quiet: true to import history"}


async def post(http: aiohttp.ClientSession, base_url: str, account: AccountKeys, body: dict[str, Any]) -> Any:
    async with http.post(f"{base_url}/v1/events", json=body, headers=account.headers) as r:
        return r.status, await r.json()


async def get(http: aiohttp.ClientSession, url: str, account: AccountKeys) -> Any:
    async with http.get(url, headers=account.headers) as r:
        assert r.status == 200, url
        return await r.json()


def start(call_id: str, caller: str, at: int, **fields: Any) -> dict[str, Any]:
    return {"type": "call.started", "call_id": call_id, "to": TO, "from": caller, "at": format_ms(at), **fields}


async def test_a_live_start_over_a_week_old_is_refused_and_a_calls_late_reports_are_taken(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    assert await post(http, base_url, account, start("late-1", "+12125550101", now_ms() - 8 * DAY_MS)) == (400, LATE)
    yesterday = now_ms() - DAY_MS - HOUR_MS
    status, _ = await post(http, base_url, account, start("late-2", "+12125550101", yesterday))
    assert status == 200
    # The call exists, so its own events are placed by their `at`, however late they come.
    turn = {"type": "turn.started", "call_id": "late-2", "role": "user", "at": format_ms(yesterday + 1_000)}
    assert (await post(http, base_url, account, turn))[0] == 200
    ended = {"type": "call.ended", "call_id": "late-2", "at": format_ms(yesterday + 90_000)}
    assert await post(http, base_url, account, ended) == (
        200,
        {"call_id": "late-2", "duration_s": 90, "spam_score": 0},
    )
    async with http.get(f"{base_url}/v1/calls/late-1", headers=account.headers) as r:
        assert (r.status, await r.json()) == (404, {"error": "not_found"})


async def test_quiet_history_up_to_400_days_is_the_accounts_own(
    service: RunningService, http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    caller = "+12125550177"
    week_ago = now_ms() - 7 * DAY_MS
    assert await post(http, base_url, account, start("q-old", caller, now_ms() - 401 * DAY_MS, quiet=True)) == (
        400,
        {"error": "invalid_at", "max_age_days": 400},
    )
    for i in range(3):
        status, answer = await post(
            http, base_url, account, start(f"q-{i}", caller, week_ago + i * HOUR_MS, quiet=True)
        )
        assert status == 200 and "capped" not in answer
        ended = {"type": "call.ended", "call_id": f"q-{i}", "at": format_ms(week_ago + i * HOUR_MS + 5_000)}
        assert (await post(http, base_url, account, ended))[0] == 200
    me = await get(http, f"{base_url}/v1/account", account)
    assert me["scoring"]["used_today"] == 0
    calls = await get(http, f"{base_url}/v1/calls?limit=10", account)
    assert sorted(c["call_id"] for c in calls["data"]) == ["q-0", "q-1", "q-2"]
    # Another account sees nothing of it: the network-wide history never heard of the caller.
    other = await create_account(service.settings, http, base_url)
    seen = await get(http, f"{base_url}/v1/reputation/%2B12125550177", other)
    assert seen["calls"] == 0 and seen["accounts"] == 0
