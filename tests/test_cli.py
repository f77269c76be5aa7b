"""The admin command line: one JSON object on stdout and exit 0, or `{"error"}` on stderr."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from typing import Any

import aiohttp
import orjson

from domain.rules import HOUR_MS
from domain.times import parse_ms
from infra.clock import now_ms
from tests.service import AccountKeys, RunningService, wait_for_status


async def cli(service: RunningService, *args: str, env: dict[str, str] | None = None) -> tuple[int, Any, str]:
    """Run `callscreen ARGS --data-dir <the service's>` with the service's broker and topics."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "callscreen.cli",
        *args,
        "--data-dir",
        str(service.data_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **service.env, **(env or {})},
    )
    out, err = await process.communicate()
    code = await process.wait()
    return code, orjson.loads(out) if out.strip() else None, err.decode()


async def test_account_create_prints_credentials_once(
    service: RunningService, http: aiohttp.ClientSession, base_url: str
) -> None:
    code, created, _ = await cli(service, "account", "create", "--plan", "watch", "--name", "acme")
    assert code == 0
    assert set(created) >= {"account_id", "key", "ingest_token", "signing_secret", "plan"}
    assert created["plan"] == "watch"
    assert created["key"].startswith("cs_live_") and len(created["key"]) == 40
    assert created["ingest_token"].startswith("cs_ing_")
    assert created["signing_secret"].startswith("whsec_")
    assert created["account_id"].startswith("acct_") and len(created["account_id"]) == 21
    await wait_for_status(
        http, "GET", f"{base_url}/v1/account", 200, headers={"Authorization": f"Bearer {created['key']}"}
    )


async def test_plan_set_takes_effect_within_a_second(
    service: RunningService, http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    code, out, _ = await cli(service, "plan", "set", "--account", account.account_id, "--plan", "watch")
    assert (code, out) == (0, {"account_id": account.account_id, "plan": "watch"})
    for _ in range(50):
        async with http.get(f"{base_url}/v1/account", headers=account.headers) as r:
            if (await r.json())["plan"] == "watch":
                return
        await asyncio.sleep(0.02)
    raise AssertionError("plan change not visible within a second")


async def test_secret_show_and_rotate(service: RunningService, account: AccountKeys) -> None:
    code, shown, _ = await cli(service, "secret", "show", "--account", account.account_id)
    assert (code, shown) == (0, {"signing_secret": account.signing_secret})
    code, rotated, _ = await cli(service, "secret", "rotate", "--account", account.account_id)
    assert code == 0
    assert rotated["signing_secret"].startswith("whsec_")
    assert rotated["signing_secret"] != account.signing_secret
    code, shown, _ = await cli(service, "secret", "show", "--account", account.account_id)
    assert shown == {"signing_secret": rotated["signing_secret"]}


async def test_trusted_and_key_commands(service: RunningService, account: AccountKeys) -> None:
    code, out, _ = await cli(
        service, "trusted", "add", "--account", account.account_id, "--number", "+1 (212) 555-0123"
    )
    assert (code, out) == (0, {"account_id": account.account_id, "number": "+12125550123", "trusted": True})
    code, key, _ = await cli(
        service, "key", "create", "--account", account.account_id, "--scope", "read", "--label", "bi"
    )
    assert code == 0
    assert key["key"].startswith("cs_read_") and key["scope"] == "read" and key["label"] == "bi"
    code, out, _ = await cli(service, "key", "revoke", "--account", account.account_id, "--key-id", key["key_id"])
    assert (code, out) == (0, {"key_id": key["key_id"], "revoked": True})
    code, token, _ = await cli(
        service, "token", "rotate", "--account", account.account_id, "--kind", "gate", "--number", "+14155552671"
    )
    assert code == 0 and token["token"].startswith("cs_gate_")


async def test_refusals_print_json_errors_and_exit_non_zero(service: RunningService, account: AccountKeys) -> None:
    code, out, err = await cli(service, "key", "revoke", "--account", "acct_nope", "--key-id", "key_x")
    assert code != 0 and out is None
    assert orjson.loads(err) == {"error": "unknown_account"}
    code, out, err = await cli(service, "trusted", "add", "--account", account.account_id, "--number", "555-0123")
    assert code != 0
    assert orjson.loads(err) == {"error": "invalid_number"}


async def test_people_are_invited_with_a_setup_link(service: RunningService, account: AccountKeys) -> None:
    """The link is on the port `run` listens on (it records it in the data dir), not the settings' 8080."""
    email = f"cli-{account.account_id.lower()}@owner.test"
    code, made, _ = await cli(service, "account", "create", "--plan", "watch", "--email", email.upper())
    assert code == 0
    assert made["setup_url"].startswith(f"{service.base_url}/dashboard/setup/cs_setup_")
    code, invited, _ = await cli(service, "user", "invite", "--account", account.account_id, "--email", "v@x.test")
    assert code == 0
    assert sorted(invited) == ["account_id", "email", "role", "setup_until", "setup_url", "user_id"]
    assert (invited["account_id"], invited["email"], invited["role"]) == (account.account_id, "v@x.test", "owner")
    assert invited["user_id"].startswith("prs_") and len(invited["user_id"]) == 20
    assert invited["setup_url"].startswith(f"{service.base_url}/dashboard/setup/cs_setup_")
    code, out, err = await cli(service, "user", "invite", "--account", account.account_id, "--email", email)
    assert (code != 0, out, orjson.loads(err)) == (True, None, {"error": "email_taken"})
    code, out, err = await cli(service, "account", "create", "--plan", "guard", "--email", "not-an-address")
    assert (code != 0, out, orjson.loads(err)) == (True, None, {"error": "invalid_email", "to": "not-an-address"})


async def test_a_setup_link_lasts_as_long_as_the_setting_says(service: RunningService, account: AccountKeys) -> None:
    before = now_ms()
    code, invited, _ = await cli(
        service,
        "user",
        "invite",
        "--account",
        account.account_id,
        "--email",
        "brief@x.test",
        env={"CALLSCREEN_SETUP_LINK_VALID_H": "1"},
    )
    after = now_ms()
    assert code == 0
    assert before + HOUR_MS <= (parse_ms(invited["setup_until"]) or 0) <= after + HOUR_MS


async def test_policy_set_scores_the_next_start_within_a_second_and_show_prints_it(
    service: RunningService, http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    args = ["policy", "set", "--account", account.account_id, "--reject", "0.5"]
    code, out, _ = await cli(service, *args, "--weight", "attestation_failed=0.6", "--off", "forwarded")
    assert code == 0
    assert out["policy"]["thresholds"] == {"review": 0.5, "reject": 0.5}
    assert (out["policy"]["weights"]["attestation_failed"], out["policy"]["off"]) == (0.6, ["forwarded"])
    code, shown, _ = await cli(service, "policy", "show", "--account", account.account_id)
    assert (code, shown) == (0, out)
    attrs = {"attestation": "failed", "forwarded_from": "+12125550100"}
    for attempt in range(50):
        body = {"type": "call.started", "call_id": f"pol-{attempt}", "to": "+14155552671", "from": "+12125550177"}
        async with http.post(f"{base_url}/v1/events", json={**body, "attrs": attrs}, headers=account.headers) as r:
            answer = await r.json()
        if answer["thresholds"]["reject"] == 0.5:
            break
        await asyncio.sleep(0.02)
    assert (answer["score"], answer["action"], answer["reasons"]) == (0.6, "reject", ["attestation_failed"])
    code, out, err = await cli(service, "policy", "set", "--account", account.account_id, "--weight", "nope=0.1")
    assert (code != 0, out, orjson.loads(err)) == (
        True,
        None,
        {"error": "invalid_field", "field": "policy.weights.nope"},
    )
    code, out, err = await cli(service, "policy", "set", "--account", account.account_id, "--review", "0.9")
    assert (code != 0, orjson.loads(err)) == (True, {"error": "invalid_field", "field": "policy.thresholds"})
    code, restored, _ = await cli(service, "policy", "set", "--account", account.account_id)
    assert code == 0 and restored["policy"]["thresholds"] == {"review": 0.5, "reject": 0.8}
    assert restored["policy"]["off"] == []
