"""The call lifecycle through the real pipeline (docs/api.md, A call's life)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from domain.times import day_start_ms, format_ms
from infra.clock import now_ms
from tests.service import AccountKeys
from tests.traffic import clear_of_midnight, on_usage_day

pytestmark = pytest.mark.slow

TO = "+14155552671"
CALLER = "+12125550123"


async def post(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, body: dict[str, Any]
) -> tuple[int, Any]:
    async with http.post(f"{base_url}/v1/events", json=body, headers=account.headers) as r:
        return r.status, await r.json()


async def get(http: aiohttp.ClientSession, url: str, account: AccountKeys) -> tuple[int, Any]:
    async with http.get(url, headers=account.headers) as r:
        return r.status, await r.json()


def start(call_id: str, **fields: Any) -> dict[str, Any]:
    return {"type": "call.started", "call_id": call_id, "to": TO, "from": CALLER, **fields}


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"type": "call.started", "to": TO, "from": CALLER}, "missing_call_id"),
        ({"type": "call.started", "call_id": "", "to": TO, "from": CALLER}, "missing_call_id"),
        (start("e1", to="555-2671"), "invalid_to"),
        (start("e2", to="+1 415"), "invalid_to"),
        (start("e3", **{"from": "anonymous"}), "invalid_from"),
        (start("e4", direction="sideways"), "invalid_direction"),
        (start("e5", direction="outbound", to="not a number"), "invalid_to"),
        ({"type": "call.ended"}, "missing_call_id"),
    ],
)
async def test_start_and_end_validation_errors(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, body: dict[str, Any], code: str
) -> None:
    assert await post(http, base_url, account, body) == (400, {"error": code})


async def test_start_then_end_settles_the_record(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    began = now_ms() - 60_000
    status, answer = await post(
        http, base_url, account, start("life-1", at=format_ms(began), attrs={"attestation": "A"})
    )
    assert status == 200
    assert answer["call_id"] == "life-1"
    assert answer["action"] == "allow"
    assert answer["thresholds"] == {"review": 0.5, "reject": 0.8}
    assert answer["block"] is None
    assert "duplicate" not in answer
    status, call = await get(http, f"{base_url}/v1/calls/life-1", account)
    assert status == 200
    assert call["state"] == "open"
    assert call["ended_at"] is None
    status, ended = await post(
        http,
        base_url,
        account,
        {
            "type": "call.ended",
            "call_id": "life-1",
            "at": format_ms(began + 42_400),
            "reason": "completed",
            "cost": 0.12,
            "attrs": {"carrier": "acme"},
        },
    )
    assert status == 200
    assert ended == {"call_id": "life-1", "duration_s": 42, "spam_score": 0}
    status, call = await get(http, f"{base_url}/v1/calls/life-1", account)
    assert call["state"] == "ended"
    assert call["duration_s"] == 42
    assert call["reason"] == "completed"
    assert call["cost"] == 0.12
    assert call["attrs"] == {"attestation": "A", "carrier": "acme"}
    assert call["at"] == format_ms(began)
    assert call["ended_at"] == format_ms(began + 42_400)


async def test_duplicate_start_returns_the_first_answer_and_counts_nothing(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    sent = now_ms()
    status, first = await post(http, base_url, account, start("dup-1", attrs={"attestation": "C"}))
    posted = [(sent, now_ms())]
    assert status == 200
    status, again = await post(http, base_url, account, start("dup-1", attrs={"attestation": "failed"}))
    assert status == 200
    assert again == {**first, "duplicate": True}
    _, me = await get(http, f"{base_url}/v1/account", account)
    assert me["scoring"]["used_today"] in on_usage_day(me, posted)  # 1, or 0 once midnight has passed
    assert me["numbers"]["used"] == 1


async def test_a_second_end_changes_no_settlement_and_a_retry_changes_nothing(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    began = now_ms() - 30_000
    await post(http, base_url, account, start("dup-end", at=format_ms(began)))
    first_end = {"type": "call.ended", "call_id": "dup-end", "at": format_ms(began + 20_000)}
    status, ended = await post(http, base_url, account, first_end)
    assert status == 200
    assert await post(http, base_url, account, first_end) == (200, {**ended, "duplicate": True})
    _, call = await get(http, f"{base_url}/v1/calls/dup-end", account)
    assert (call["duration_s"], call["cost"], call["reason"]) == (20, None, "ended")
    # Another report of the end (say, the platform's after its carrier's): the settlement stands, and its
    # cost merges in.
    second_end = {**first_end, "at": format_ms(began + 29_000), "cost": 9.0, "reason": "hangup"}
    status, again = await post(http, base_url, account, second_end)
    assert (status, again) == (200, {**ended, "duplicate": True})
    _, call = await get(http, f"{base_url}/v1/calls/dup-end", account)
    assert (call["duration_s"], call["cost"], call["reason"], call["spam_score"]) == (
        20,
        9.0,
        "ended",
        ended["spam_score"],
    )


async def test_end_and_turn_for_unknown_call_are_404(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    assert await post(http, base_url, account, {"type": "call.ended", "call_id": "ghost"}) == (
        404,
        {"error": "unknown_call"},
    )
    turn = {"type": "turn.started", "call_id": "ghost", "role": "user"}
    assert await post(http, base_url, account, turn) == (404, {"error": "unknown_call"})


async def test_register_false_refuses_unknown_numbers(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    assert await post(http, base_url, account, start("np-1", register=False)) == (409, {"error": "not_protected"})
    assert (await get(http, f"{base_url}/v1/calls/np-1", account))[0] == 404
    status, _ = await post(http, base_url, account, start("np-2"))
    assert status == 200
    status, _ = await post(http, base_url, account, start("np-3", register=False))
    assert status == 200


async def test_number_cap_of_the_plan(http: aiohttp.ClientSession, base_url: str, watch_account: AccountKeys) -> None:
    for i in range(3):
        status, _ = await post(http, base_url, watch_account, start(f"cap-{i}", to=f"+1415555267{i}"))
        assert status == 200
    assert await post(http, base_url, watch_account, start("cap-3", to="+14155552679")) == (
        402,
        {"error": "number_limit", "cap": 3},
    )
    status, _ = await post(http, base_url, watch_account, start("cap-4", to="+14155552670"))
    assert status == 200
    _, numbers = await get(http, f"{base_url}/v1/numbers", watch_account)
    assert numbers["cap"] == 3
    assert [n["number"] for n in numbers["data"]] == ["+14155552670", "+14155552671", "+14155552672"]
    assert [n["calls_24h"] for n in numbers["data"]] == [2, 1, 1]


async def test_lenient_numbers_are_one_number(http: aiohttp.ClientSession, base_url: str, account: AccountKeys) -> None:
    await post(http, base_url, account, start("len-1", to="+1 (415) 555-2671", **{"from": "+1 212-555-0123"}))
    await post(http, base_url, account, start("len-2", to="+14155552671"))
    _, numbers = await get(http, f"{base_url}/v1/numbers", account)
    assert [(n["number"], n["calls_24h"]) for n in numbers["data"]] == [("+14155552671", 2)]
    _, call = await get(http, f"{base_url}/v1/calls/len-1", account)
    assert (call["to"], call["from"]) == ("+14155552671", "+12125550123")
    _, second = await post(http, base_url, account, start("len-3", to="+1.415.555.2671"))
    assert second["checks"]["caller_calls_10m"] == 3


async def test_outbound_flips_roles(http: aiohttp.ClientSession, base_url: str, account: AccountKeys) -> None:
    body = start("out-1", direction="outbound", to="+12125550123", **{"from": "+14155552671"})
    status, _ = await post(http, base_url, account, body)
    assert status == 200
    _, numbers = await get(http, f"{base_url}/v1/numbers", account)
    assert [n["number"] for n in numbers["data"]] == ["+14155552671"]
    _, call = await get(http, f"{base_url}/v1/calls/out-1", account)
    assert call["direction"] == "outbound"


async def test_daily_allowance_caps_scoring_but_records_the_call(
    http: aiohttp.ClientSession, base_url: str, watch_account: AccountKeys
) -> None:
    # The allowance counts by the day of receipt: these thousand starts must all land on one day.
    await clear_of_midnight(120)
    day = day_start_ms(now_ms())

    async def one(i: int) -> int:
        """A start as a platform sends it: a 503 (past the answer deadline, the record is in the log) is
        posted again after its Retry-After, as docs/api.md asks, and answers as the duplicate it is."""
        for _ in range(3):
            status, answer = await post(http, base_url, watch_account, start(f"allow-{i}"))
            if status != 503:
                return status
            assert answer == {"error": "unavailable"}
            await asyncio.sleep(1)
        return status

    # Twenty at a time: enough to be quick, not a load test (a loaded machine answers 50 at once past 2 s).
    for batch in range(0, 1000, 20):
        assert set(await asyncio.gather(*(one(i) for i in range(batch, batch + 20)))) == {200}
    status, capped = await post(http, base_url, watch_account, start("allow-over", attrs={"attestation": "failed"}))
    assert status == 200
    assert capped["capped"] is True
    assert capped["cap"] == {"allowance": 1000, "used": 1000, "resets_at": format_ms(day + 86_400_000)}
    assert (capped["action"], capped["score"], capped["reasons"]) == ("allow", 0.0, ["capped"])
    status, _call = await get(http, f"{base_url}/v1/calls/allow-over", watch_account)
    assert status == 200
    status, ended = await post(http, base_url, watch_account, {"type": "call.ended", "call_id": "allow-over"})
    assert (status, ended["spam_score"]) == (200, None)


async def test_provider_call_id_folds_carrier_and_platform_reports(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    began = now_ms() - 100_000
    status, first = await post(http, base_url, account, start("plat-1", provider_call_id="CA-77", at=format_ms(began)))
    assert status == 200
    status, carrier = await post(http, base_url, account, start("CA-77", at=format_ms(began + 500)))
    assert status == 200
    # One record: the carrier's report gets the decided answer, under the id it sent.
    assert carrier == {**first, "call_id": "CA-77", "duplicate": True}
    status, ended = await post(
        http,
        base_url,
        account,
        {
            "type": "call.ended",
            "call_id": "CA-77",
            "at": format_ms(began + 61_000),
            "cost": 0.02,
            "cost_breakdown": {"carrier": 0.02},
        },
    )
    assert (status, ended["call_id"], ended["duration_s"]) == (200, "plat-1", 61)
    status, again = await post(
        http,
        base_url,
        account,
        {
            "type": "call.ended",
            "call_id": "plat-1",
            "cost": 0.30,
            "cost_breakdown": {"llm": 0.2, "tts": 0.05, "stt": 0.03, "platform": 0.02},
        },
    )
    assert (status, again["duplicate"]) == (200, True)
    _, listed = await get(http, f"{base_url}/v1/calls", account)
    assert [c["call_id"] for c in listed["data"]] == ["plat-1"]


async def test_list_calls_filters_and_cursor(http: aiohttp.ClientSession, base_url: str, account: AccountKeys) -> None:
    base = now_ms() - 600_000
    for i in range(7):
        attrs = {"attestation": "failed"} if i % 2 else {"attestation": "A"}
        await post(
            http,
            base_url,
            account,
            start(f"list-{i}", at=format_ms(base + i * 1000), attrs=attrs, **{"from": f"+12125{i}50100"}),
        )
    seen: list[str] = []
    url = f"{base_url}/v1/calls?limit=3"
    while url:
        status, page = await get(http, url, account)
        assert status == 200
        assert len(page["data"]) <= 3
        seen += [c["call_id"] for c in page["data"]]
        url = f"{base_url}/v1/calls?limit=3&cursor={page['next_cursor']}" if page["next_cursor"] else ""
    assert seen == [f"list-{i}" for i in reversed(range(7))]
    _, reviewed = await get(http, f"{base_url}/v1/calls?action=review", account)
    assert [c["call_id"] for c in reviewed["data"]] == ["list-5", "list-3", "list-1"]
    since, until = format_ms(base + 2000), format_ms(base + 4000)
    _, window = await get(http, f"{base_url}/v1/calls?since={since.replace('+', '%2B')}&until={until}", account)
    assert [c["call_id"] for c in window["data"]] == ["list-3", "list-2"]
    _, by_caller = await get(http, f"{base_url}/v1/calls?number=%2B12125450100", account)
    assert [c["call_id"] for c in by_caller["data"]] == ["list-4"]
    for bad in ("limit=0", "limit=201", "action=maybe", "since=yesterday", "cursor=!!", "number=12"):
        status, body = await get(http, f"{base_url}/v1/calls?{bad}", account)
        assert (status, body) == (400, {"error": "invalid_field", "field": bad.split("=")[0]})


async def test_another_accounts_call_is_not_found(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, watch_account: AccountKeys
) -> None:
    await post(http, base_url, account, start("mine-only"))
    assert await get(http, f"{base_url}/v1/calls/mine-only", watch_account) == (404, {"error": "not_found"})
    _, listed = await get(http, f"{base_url}/v1/calls", watch_account)
    assert listed == {"data": [], "next_cursor": None}


PLATFORM_BREAKDOWN = {"llm": 0.2, "stt": 0.03, "tts": 0.03, "carrier": 0.02, "platform": 0.02}


@pytest.mark.parametrize("carrier_first", [True, False], ids=["carrier_first", "platform_first"])
async def test_a_platform_and_its_carrier_make_one_record_with_the_larger_cost(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, carrier_first: bool
) -> None:
    tag = "cf" if carrier_first else "pf"
    carrier_id, platform_id = f"CA-{tag}", f"agent-{tag}"
    # A caller of its own: other tests' accounts' good calls from CALLER would give it prior_good's relief.
    caller = "+12125550188" if carrier_first else "+12125550189"
    carrier = start(carrier_id, source="carrier", attrs={"attestation": "B", "carrier": "telnyx"}, **{"from": caller})
    platform = start(
        platform_id, provider_call_id=carrier_id, source="vapi", attrs={"answered_by": "human"}, **{"from": caller}
    )
    first, second = (carrier, platform) if carrier_first else (platform, carrier)
    # The first report is scored (the carrier's attestation B, or the platform's nothing); the second
    # gets that answer.
    score = 0.25 if carrier_first else 0.0
    status, answer = await post(http, base_url, account, first)
    assert (status, answer["score"], "duplicate" in answer) == (200, score, False)
    status, again = await post(http, base_url, account, second)
    assert (status, again["call_id"], again["duplicate"], again["score"]) == (200, second["call_id"], True, score)
    stored = carrier_id if carrier_first else platform_id
    carrier_end = {"type": "call.ended", "call_id": carrier_id, "cost": 0.02, "cost_breakdown": {"carrier": 0.02}}
    platform_end = {"type": "call.ended", "call_id": platform_id, "cost": 0.3, "cost_breakdown": PLATFORM_BREAKDOWN}
    ends = (carrier_end, platform_end) if carrier_first else (platform_end, carrier_end)
    answers = [await post(http, base_url, account, body) for body in (*ends, ends[0])]
    assert [(s, a["call_id"], a.get("duplicate", False)) for s, a in answers] == [
        (200, stored, False),
        (200, stored, True),
        (200, stored, True),
    ]
    status, record = await get(http, f"{base_url}/v1/calls/{platform_id}", account)
    assert status == 200
    assert (record["call_id"], record["cost"], record["cost_breakdown"]) == (stored, 0.3, PLATFORM_BREAKDOWN)
    assert record["attrs"] == {"attestation": "B", "carrier": "telnyx", "answered_by": "human"}
    status, listed = await get(http, f"{base_url}/v1/calls?limit=10", account)
    assert [c["call_id"] for c in listed["data"]] == [stored]
    status, me = await get(http, f"{base_url}/v1/account", account)
    assert me["scoring"]["used_today"] == 1
