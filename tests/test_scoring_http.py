"""The synchronous score through the real pipeline (docs/rules.md, Scoring)."""

from __future__ import annotations

from typing import Any

import aiohttp

from callscreen.admin import Admin
from domain.times import format_ms
from infra.clock import now_ms
from tests.service import AccountKeys, RunningService

TO = "+14155552671"
MOBILE = "+447911123456"


async def post(http: aiohttp.ClientSession, base_url: str, account: AccountKeys, body: dict[str, Any]) -> Any:
    async with http.post(f"{base_url}/v1/events", json=body, headers=account.headers) as r:
        assert r.status == 200, await r.text()
        return await r.json()


def start(call_id: str, caller: str, **fields: Any) -> dict[str, Any]:
    return {"type": "call.started", "call_id": call_id, "to": TO, "from": caller, **fields}


async def test_first_call_with_attestation_a_from_a_valid_mobile_is_allowed(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    answer = await post(http, base_url, account, start("s-a", "+447911123001", attrs={"attestation": "A"}))
    assert (answer["score"], answer["action"], answer["reasons"]) == (0.0, "allow", [])
    assert answer["prior"] == {"points": 0, "calls": 0, "good": 0, "last": None}


async def test_failed_attestation_is_at_least_review(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    answer = await post(http, base_url, account, start("s-f", "+447911123002", attrs={"attestation": "failed"}))
    assert answer["action"] in ("review", "reject")
    assert answer["score"] == 0.55
    assert answer["reasons"] == ["attestation_failed"]


async def test_trusted_caller_is_allowed_whatever_else(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, service: RunningService
) -> None:
    async with Admin(service.settings) as admin:
        await admin.trusted("add", account.account_id, "+44 7911 123003")
    body = start("s-t", "+447911123003", attrs={"attestation": "failed", "forwarded_from": "+12125550000"})
    for attempt in range(50):
        answer = await post(http, base_url, account, {**body, "call_id": f"s-t-{attempt}"})
        if answer["reasons"] == ["trusted"]:
            break
    assert (answer["score"], answer["action"], answer["reasons"]) == (0.0, "allow", ["trusted"])


async def test_noisy_or_combines_signals_largest_first(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    premium = "+19005550100"
    answer = await post(
        http, base_url, account, start("s-n", premium, attrs={"attestation": "C", "forwarded_from": "+12125550001"})
    )
    assert answer["reasons"] == ["attestation_c", "premium_rate_caller", "forwarded"]
    assert answer["score"] == round(1 - (1 - 0.35) * (1 - 0.30) * (1 - 0.05), 4) == 0.5677
    assert answer["action"] == "review"


async def test_self_call_and_neighbor_spoof(http: aiohttp.ClientSession, base_url: str, account: AccountKeys) -> None:
    own = await post(http, base_url, account, start("s-self", TO))
    assert own["reasons"] == ["self_call"]
    assert own["action"] == "review"
    neighbor = await post(http, base_url, account, start("s-nb", "+14155559999"))
    assert neighbor["reasons"] == ["neighbor_spoof"]


async def test_rate_exceeded_on_the_sixth_call_in_ten_minutes(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    base = now_ms() - 300_000
    caller = "+447911123777"
    answers = [
        await post(http, base_url, account, start(f"s-r{i}", caller, at=format_ms(base + i * 60_000))) for i in range(6)
    ]
    assert [a["checks"]["caller_calls_10m"] for a in answers] == [1, 2, 3, 4, 5, 6]
    assert "rate_exceeded" not in answers[4]["reasons"]
    assert "rate_exceeded" in answers[5]["reasons"]


async def test_prior_bad_after_a_call_that_settled_at_70_or_more(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, watch_account: AccountKeys
) -> None:
    caller = "+19005550177"
    began = now_ms() - 20 * 3_600_000  # live events may be at most 24 h old
    first = await post(
        http, base_url, account, start("s-p1", caller, at=format_ms(began), attrs={"attestation": "failed"})
    )
    assert first["score"] == round(1 - 0.45 * 0.70, 4)
    ended = await post(
        http,
        base_url,
        account,
        {"type": "call.ended", "call_id": "s-p1", "at": format_ms(began + 4_000), "reason": "completed"},
    )
    assert ended["spam_score"] >= 70
    # Another account sees the call in `prior`, but one account's history does not move its score.
    second = await post(http, base_url, watch_account, {**start("s-p2", caller), "attrs": {"attestation": "A"}})
    assert (second["reasons"], second["checks"]["network_bad_accounts"]) == (["premium_rate_caller"], 1)
    assert second["prior"]["calls"] == 1
    assert second["prior"]["last"] == {"score": ended["spam_score"], "days": 0}
    # The account's own history always counts.
    own = await post(http, base_url, account, {**start("s-p3", caller), "attrs": {"attestation": "A"}})
    assert own["reasons"] == ["prior_bad", "premium_rate_caller"]
    async with http.get(f"{base_url}/v1/reputation/%2B19005550177", headers=account.headers) as r:
        reputation = await r.json()
    assert reputation["calls"] == 3
    assert reputation["accounts"] == 2
    assert reputation["last"] == {"score": round(own["score"] * 100), "days": 0}
    assert reputation["flags"] == ["prior_bad"]
    assert "account_id" not in str(reputation) and account.account_id not in str(reputation)


async def test_score_lookup_is_computed_not_recorded(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    url = f"{base_url}/v1/score?from=%2B447911123555&to=%2B14155552671"
    async with http.get(url, headers=account.headers) as r:
        assert r.status == 200
        looked = await r.json()
    assert looked["action"] == "allow" and looked["thresholds"] == {"review": 0.5, "reject": 0.8}
    async with http.get(f"{base_url}/v1/account", headers=account.headers) as r:
        me = await r.json()
    assert me["scoring"]["used_today"] == 0 and me["numbers"]["used"] == 0
    async with http.get(f"{base_url}/v1/score?from=nope&to=%2B14155552671", headers=account.headers) as r:
        assert (r.status, await r.json()) == (400, {"error": "invalid_from"})
    async with http.get(f"{base_url}/v1/reputation/12", headers=account.headers) as r:
        assert (r.status, await r.json()) == (400, {"error": "invalid_caller"})
