"""GET /v1/evaluation on the edge alone (decisions section 17): the labelled calls of the window by live
action and label, with the three rates; what it refuses."""

from __future__ import annotations

from typing import Any

import aiohttp

from domain import commands
from domain.rules import MIN_MS
from domain.times import format_ms
from infra.clock import now_ms
from tests.edge.conftest import EdgeUnderTest
from tests.edge.test_records import violations
from tests.service import AccountKeys

TO = "+14155552671"
# Callers of different areas, half an hour apart: no pattern on the number links them.
CALLERS = ["+12125550101", "+13125550102", "+16465550103", "+17185550104", "+19175550105", "+13055550106"]
SPACING = 30 * MIN_MS


async def labelled_call(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, n: int, at: int, attrs: dict[str, Any], label: str
) -> list[str]:
    """A call from its own caller started at `at`, labelled `label`; its live reasons."""
    body = {
        "type": "call.started",
        "call_id": f"ev-{n}",
        "to": TO,
        "from": CALLERS[n % len(CALLERS)],
        "at": format_ms(at),
    }
    async with http.post(f"{base_url}/v1/events", json={**body, "attrs": attrs}, headers=account.headers) as r:
        assert r.status == 200, await r.text()
        reasons = list((await r.json())["reasons"])
    async with http.post(f"{base_url}/v1/calls/ev-{n}/label", json={"label": label}, headers=account.headers) as r:
        assert r.status == 200, await r.text()
    return reasons


async def test_the_evaluation_of_a_labelled_set(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, edge: EdgeUnderTest
) -> None:
    base = now_ms() - 6 * len(CALLERS) * SPACING
    failed, plain = {"attestation": "failed"}, {"attestation": "A"}
    # Two review spam, one review good, one allow spam, two allow good; one more, outside the window.
    plan = [(failed, "spam"), (failed, "spam"), (failed, "good"), (plain, "spam"), (plain, "good"), (plain, "good")]
    for n, (attrs, label) in enumerate(plan):
        reasons = await labelled_call(http, base_url, account, n, base + n * SPACING, attrs, label)
        assert reasons == (["attestation_failed"] if attrs is failed else [])
    await labelled_call(http, base_url, account, 99, base - 2 * SPACING, failed, "spam")
    read = await edge.change(commands.create_key(edge.accounts.accounts[account.account_id], "read", "evaluation"))
    query = {"since": format_ms(base), "until": format_ms(base + len(plan) * SPACING)}
    async with http.get(
        f"{base_url}/v1/evaluation", params=query, headers={"Authorization": f"Bearer {read['key']}"}
    ) as r:
        assert r.status == 200, await r.text()
        body = await r.json()
    assert body == {
        "labelled": 6,
        "matrix": {
            "allow": {"spam": 1, "good": 2},
            "review": {"spam": 2, "good": 1},
            "reject": {"spam": 0, "good": 0},
        },
        "precision": None,
        "recall": 0.0,
        "false_positive_rate": 0.0,
        "by_reason": {"attestation_failed": {"spam": 2, "good": 1}},
    }
    assert violations("Evaluation", body) == []
    # No window: every labelled call of the account.
    async with http.get(f"{base_url}/v1/evaluation", headers=account.headers) as r:
        whole = await r.json()
    assert (whole["labelled"], whole["matrix"]["review"]) == (7, {"spam": 3, "good": 1})


async def test_evaluation_refusals(http: aiohttp.ClientSession, base_url: str, account: AccountKeys) -> None:
    url = f"{base_url}/v1/evaluation"
    async with http.get(url) as r:
        assert (r.status, (await r.json())["error"]) == (401, "missing_key")
    for params, field in (
        ({"since": "yesterday"}, "since"),
        ({"until": "2026-13-01T00:00:00Z"}, "until"),
        ({"since": "2026-12-02T00:00:00Z", "until": "2026-12-01T00:00:00Z"}, "until"),
        ({"since": "2026-12-01T00:00:00Z", "until": "2026-12-01T00:00:00Z"}, "until"),
    ):
        async with http.get(url, params=params, headers=account.headers) as r:
            assert (r.status, await r.json()) == (400, {"error": "invalid_field", "field": field}), params
