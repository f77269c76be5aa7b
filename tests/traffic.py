"""Deterministic mixed traffic for the log tests: starts, turns, ends and alert-raising bursts."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import aiohttp
import orjson

from domain.rules import DAY_MS, HOUR_MS
from domain.times import format_ms, parse_ms
from infra.clock import now_ms
from tests.service import AccountKeys

NUMBERS = ("+14155552671", "+14155552672")
CALL_SPACING_MS = 4_000
# For a test that compares two reads minutes apart: the sweep's ticks land wherever the wall clock puts them
# (a spike's hour ends, `number.volume_normal` follows), so between the reads they would add alerts.
NO_SWEEP = {"CALLSCREEN_SILENT_SWEEP_S": "3600"}


def past_every_window(calls: int) -> int:
    """A `base` for `script(..., calls)` whose last call is older than every window, pattern and block the
    rules keep (a block, the longest, lasts an hour): answers to a score or a listing then do not change with
    the wall clock while a test compares two reads minutes apart."""
    return now_ms() - 2 * HOUR_MS - calls * CALL_SPACING_MS


def script(seed: int, base: int, calls: int) -> list[dict[str, Any]]:
    """Event bodies in posting order; every call ends, so no sweep can add anything later."""
    rng = random.Random(seed)
    bodies: list[dict[str, Any]] = []
    for i in range(calls):
        at = base + i * CALL_SPACING_MS
        call_id = f"s{seed}-{i}"
        if i % 25 < 6:
            caller = f"+4479112{seed:02d}{i // 25:03d}"
        elif i % 25 < 11:
            caller = f"+1212{seed:02d}{i // 25:02d}{i % 25:03d}"[:12]
        else:
            caller = f"+1646{rng.randrange(10**7):07d}"
        attrs: dict[str, Any] = {"attestation": rng.choice(["A", "A", "B", "C", "failed", "none"])}
        if rng.random() < 0.2:
            attrs["geo"] = {"zip": "73301", "city": "Austin", "region": "TX"}
        bodies.append(
            {
                "type": "call.started",
                "call_id": call_id,
                "to": rng.choice(NUMBERS),
                "from": caller,
                "at": format_ms(at),
                "attrs": attrs,
                "cost": round(rng.random(), 2),
            }
        )
        for turn in range(rng.randrange(0, 10)):
            role = "user" if turn % 2 else "agent"
            begin = at + 1_000 + turn * 300
            bodies.append({"type": "turn.started", "call_id": call_id, "role": role, "at": format_ms(begin)})
            ended: dict[str, Any] = {
                "type": "turn.ended",
                "call_id": call_id,
                "role": role,
                "at": format_ms(begin + 250),
            }
            if rng.random() < 0.5:
                ended["text"] = rng.choice(["press one now", "hello there, how can I help", "yes"])
            else:
                ended["words"] = rng.randrange(1, 40)
            bodies.append(ended)
        if rng.random() < 0.1:
            bodies.append({"type": "interruption", "call_id": call_id, "at": format_ms(at + 3_500)})
        bodies.append(
            {
                "type": "call.ended",
                "call_id": call_id,
                "at": format_ms(at + 3_900),
                "reason": rng.choice(["completed", "hangup", "busy"]),
                "cost": round(rng.random(), 2),
            }
        )
    return bodies


async def post_all(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, bodies: list[dict[str, Any]]
) -> list[tuple[int, Any]]:
    answers = []
    for body in bodies:
        async with http.post(f"{base_url}/v1/events", json=body, headers=account.headers) as r:
            answers.append((r.status, await r.json()))
    return answers


async def snapshot(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, callers: list[str]
) -> dict[str, Any]:
    """Every read endpoint's answer for one account, by path."""
    seen: dict[str, Any] = {}

    async def get(path: str) -> Any:
        async with http.get(f"{base_url}{path}", headers=account.headers) as r:
            assert r.status == 200, (path, r.status)
            seen[path] = await r.json()
            return seen[path]

    for listing, kind in (("/v1/calls?limit=200", "calls"), ("/v1/alerts?limit=200", "alerts")):
        page = await get(listing)
        ids = [item["call_id" if kind == "calls" else "id"] for item in page["data"]]
        while page["next_cursor"]:
            page = await get(f"{listing}&cursor={page['next_cursor']}")
            ids += [item["call_id" if kind == "calls" else "id"] for item in page["data"]]
        for item_id in ids:
            await get(f"/v1/{kind}/{item_id}")
    await get("/v1/numbers")
    await get("/v1/account")
    await get("/v1/evaluation")
    for caller in callers:
        encoded = caller.replace("+", "%2B")
        await get(f"/v1/reputation/{encoded}")
        await get(f"/v1/score?from={encoded}&to=%2B14155552671")
    return seen


async def clear_of_midnight(seconds: int) -> None:
    """Wait, when UTC midnight is less than `seconds` away, until it has passed: for a test whose
    counts by the day of receipt must all fall on one day."""
    left = DAY_MS - now_ms() % DAY_MS
    if left < seconds * 1000:
        await asyncio.sleep(left / 1000 + 0.1)


def on_usage_day(account: dict[str, Any], posted: list[tuple[int, int]]) -> range:
    """How many starts, posted between these (sent, answered) wall times, `GET /v1/account` may count today.

    The allowance counts by the day of receipt, and a test may run across midnight: a start in flight at
    midnight may fall on either day.
    """
    resets_at = instant(account["scoring"]["resets_at"])
    day = range(resets_at - DAY_MS, resets_at)
    surely = sum(1 for sent, answered in posted if sent in day and answered in day)
    maybe = sum(1 for sent, answered in posted if (sent in day) != (answered in day))
    return range(surely, surely + maybe + 1)


def instant(text: str) -> int:
    at = parse_ms(text)
    assert at is not None, text
    return at


def comparable(views: list[dict[str, Any]], against: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The views, leaving out today's scoring count when midnight fell between the two reads."""
    kept = []
    for view, other in zip(views, against, strict=True):
        account, earlier = view["/v1/account"], other["/v1/account"]
        if account["scoring"]["resets_at"] != earlier["scoring"]["resets_at"]:
            view = {**view, "/v1/account": {k: v for k, v in account.items() if k != "scoring"}}
        kept.append(view)
    return kept


def assert_same_answers(now: list[dict[str, Any]], before: list[dict[str, Any]]) -> None:
    """Every answer byte for byte as before; a failure names the paths whose answers changed."""
    left, right = comparable(now, before), comparable(before, now)
    if orjson.dumps(left) != orjson.dumps(right):
        changed = differences(left, right, "")
        raise AssertionError(f"{len(changed)} answers changed (path: now != before): {changed[:20]}")


def differences(now: Any, before: Any, path: str) -> list[str]:
    if isinstance(now, dict) and isinstance(before, dict):
        if list(now) != list(before):
            only_now, only_before = now.keys() - before.keys(), before.keys() - now.keys()
            if only_now or only_before:
                return [f"{path}: only now {sorted(only_now)}, only before {sorted(only_before)}"]
            return [f"{path}: the same keys in another order"]
        return [d for key in now for d in differences(now[key], before[key], f"{path}/{key}")]
    if isinstance(now, list) and isinstance(before, list) and len(now) == len(before):
        return [d for i, (a, b) in enumerate(zip(now, before, strict=True)) for d in differences(a, b, f"{path}[{i}]")]
    return [] if orjson.dumps(now) == orjson.dumps(before) else [f"{path}: {now!r} != {before!r}"]


def outbound_start(call_id: str, at: int, to: str, **attrs: Any) -> dict[str, Any]:
    """An agent's outbound start from the protected number +14155552671."""
    body = {"type": "call.started", "call_id": call_id, "direction": "outbound", "from": "+14155552671", "to": to}
    return {**body, "at": format_ms(at), "attrs": attrs}


async def outbound_in_effect(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, to: str, reasons: list[str]
) -> None:
    """Once an outbound start to `to` would get `reasons`: the account's outbound records reached the edge."""
    url = f"{base_url}/v1/score?to={to.replace('+', '%2B')}&from=%2B14155552671&direction=outbound"
    for _ in range(100):
        async with http.get(url, headers=account.headers) as r:
            if (await r.json())["reasons"] == reasons:
                return
        await asyncio.sleep(0.05)
    raise AssertionError(f"an outbound start to {to} never got {reasons}")
