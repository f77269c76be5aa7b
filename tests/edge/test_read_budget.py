"""An account's reads share one budget across all its keys (docs/api.md, Limits): keys are cheap to make,
so the per-key limit alone let one account with many read keys fill every worker's read budget."""

from __future__ import annotations

import asyncio
import time

import aiohttp

from domain import commands
from tests.edge.conftest import EdgeUnderTest
from tests.service import AccountKeys, wait_for_status

ACCOUNT_LIMIT = 1200


async def test_reads_over_the_accounts_budget_are_refused_whichever_key_sends_them(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, edge: EdgeUnderTest
) -> None:
    made = edge.accounts.accounts[account.account_id]
    keys = [(await edge.change(commands.create_key(made, "read", f"r{i}")))["key"] for i in range(3)]
    # From before the first read the budget counts: what refills while the keys reach the edge counts too.
    started = time.monotonic()
    for key in keys:
        await wait_for_status(http, "GET", f"{base_url}/v1/account", 200, headers={"Authorization": f"Bearer {key}"})
    sent = len(keys)
    while True:
        sent += 1
        # Round-robin over three keys: each stays far under its own 600 a minute.
        key = keys[sent % len(keys)]
        asked = time.monotonic()
        async with http.get(f"{base_url}/v1/account", headers={"Authorization": f"Bearer {key}"}) as r:
            if r.status == 429:
                body, retry = await r.json(), int(r.headers["Retry-After"])
                held = time.monotonic() - asked
                break
            assert r.status == 200
        assert sent < 2 * ACCOUNT_LIMIT, "no 429 from the account's budget"
    refilled = (time.monotonic() - started) * ACCOUNT_LIMIT / 60
    assert ACCOUNT_LIMIT < sent <= ACCOUNT_LIMIT + refilled + 1
    assert (body, retry >= 1) == ({"error": "rate_limited", "limit": ACCOUNT_LIMIT, "window_s": 60}, True)
    # The refusal was held before it was sent (`refusal_hold_s`, its Retry-After being longer).
    assert held >= edge.settings.refusal_hold_s == 1.0
    # Another account's reads are its own.
    other = await edge.new_account()
    await wait_for_status(http, "GET", f"{base_url}/v1/account", 200, headers=other.headers)


async def test_an_account_holds_at_most_twenty_keys(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, edge: EdgeUnderTest
) -> None:
    made = edge.accounts.accounts[account.account_id]
    held = sum(not key.revoked for key in made.keys.values())
    for i in range(20 - held):
        await edge.change(commands.create_key(made, "read", f"k{i}"))
    await wait_for_status(http, "GET", f"{base_url}/v1/account", 200, headers=account.headers)
    made = edge.accounts.accounts[account.account_id]
    assert sum(not key.revoked for key in made.keys.values()) == 20
    try:
        commands.create_key(made, "read", "one more")
    except commands.Refused as refused:
        assert (str(refused), refused.context) == ("key_limit", {"limit": 20})
    else:
        raise AssertionError("a 21st key was made")
    # A revoked key frees its place.
    revoked = next(k for k in made.keys if k != account.key_id)
    await edge.change(commands.revoke_key(made, revoked))
    deadline = time.monotonic() + 1.0
    while not edge.accounts.accounts[account.account_id].keys[revoked].revoked:
        assert time.monotonic() < deadline, "the revocation never reached the edge"
        await asyncio.sleep(0.01)
    assert commands.create_key(edge.accounts.accounts[account.account_id], "read", "now")
