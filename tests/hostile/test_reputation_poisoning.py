"""One tenant cannot poison a number for every other: six starts with `attestation: failed` from one
account (the sixth over the rate, so it scores past `reject`) leave another account's start of the same
caller allowed. On older code the network's newest start spoke for everyone, and every other tenant
challenged the victim."""

from __future__ import annotations

from typing import Any

import aiohttp

from domain.times import format_ms
from infra.clock import now_ms
from tests.service import AccountKeys, RunningService, create_account

VICTIM = "+19197771234"


async def post(http: aiohttp.ClientSession, base_url: str, account: AccountKeys, body: dict[str, Any]) -> Any:
    async with http.post(f"{base_url}/v1/events", json=body, headers=account.headers) as r:
        return r.status, await r.json()


def start(call_id: str, at: int, **fields: Any) -> dict[str, Any]:
    return {
        "type": "call.started",
        "call_id": call_id,
        "to": "+14155552671",
        "from": VICTIM,
        "at": format_ms(at),
        **fields,
    }


async def test_one_tenants_failed_attestations_do_not_move_another_tenants_score(
    service: RunningService, http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    began = now_ms() - 120_000
    answers = [
        await post(http, base_url, account, start(f"poison-{i}", began + i * 10_000, attrs={"attestation": "failed"}))
        for i in range(6)
    ]
    assert [a["action"] for _, a in answers] == ["review"] * 5 + ["reject"]
    other = await create_account(service.settings, http, base_url)
    status, answer = await post(http, base_url, other, start("clean", now_ms(), attrs={"attestation": "A"}))
    assert (status, answer["action"], answer["reasons"], answer["score"]) == (200, "allow", [], 0.0)
    assert (answer["checks"]["network_bad_accounts"], answer["prior"]["calls"]) == (1, 6)


async def post_with_token(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, body: dict[str, Any]
) -> Any:
    """The way a platform's webhook posts: the account's ingest token in the path, no key."""
    async with http.post(f"{base_url}/v1/events/{account.ingest_token}", json=body) as r:
        return r.status, await r.json()


async def test_two_tenants_tokens_do_not_move_a_third_tenants_score(
    service: RunningService, http: aiohttp.ClientSession, base_url: str
) -> None:
    """Ingest tokens live in URLs that platforms and their logs hold: two leaked ones, each posting six
    failed attestations (the sixth over the rate, past `reject`), count for one account between them, not
    the two that move another tenant's score; a key's agreement beside them does."""
    victim = "+19197771235"
    began = now_ms() - 120_000
    poisoners = [await create_account(service.settings, http, base_url) for _ in range(2)]
    for n, poisoner in enumerate(poisoners):
        answers = [
            await post_with_token(
                http,
                base_url,
                poisoner,
                {**start(f"tok-{n}-{i}", began + i * 10_000, attrs={"attestation": "failed"}), "from": victim},
            )
            for i in range(6)
        ]
        assert [(s, a["action"]) for s, a in answers] == [(200, "review")] * 5 + [(200, "reject")]
    third = await create_account(service.settings, http, base_url)
    status, answer = await post(
        http, base_url, third, {**start("clean-1", now_ms(), attrs={"attestation": "A"}), "from": victim}
    )
    assert (status, answer["action"], answer["reasons"], answer["score"]) == (200, "allow", [], 0.0)
    checks = answer["checks"]
    assert (checks["network_bad_accounts"], checks["network_bad_token_accounts"], answer["prior"]["calls"]) == (
        2,
        2,
        12,
    )
    # A third poisoner with its API key is one whole account more: two and a half agree.
    keyed = await create_account(service.settings, http, base_url)
    for i in range(6):
        body = {**start(f"key-{i}", began + 60_000 + i * 10_000, attrs={"attestation": "failed"}), "from": victim}
        assert (await post(http, base_url, keyed, body))[0] == 200
    status, answer = await post(
        http, base_url, third, {**start("clean-2", now_ms(), attrs={"attestation": "A"}), "from": victim}
    )
    assert (status, answer["action"], answer["reasons"], answer["score"]) == (200, "review", ["prior_bad"], 0.5)
    assert (answer["checks"]["network_bad_accounts"], answer["checks"]["network_bad_token_accounts"]) == (3, 2)
