"""The per-call turn cap, on a service started with a small cap so the test stays inside the rate limit.

The mechanism is the same at the default of 3,000 (a setting); 3,000 turns would take a single
account past its 1,200 events a minute.
"""

from __future__ import annotations

from collections.abc import Iterator

import aiohttp
import pytest

from tests.service import RunningService, create_account, running_service

CAP = 20


@pytest.fixture(scope="module")
def small_service(kafka: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    env = {"CALLSCREEN_MAX_CALL_TURNS": str(CAP)}
    with running_service(tmp_path_factory.mktemp("small") / "data", kafka, env=env) as running:
        yield running


async def test_turns_past_the_cap_are_ignored(small_service: RunningService, http: aiohttp.ClientSession) -> None:
    base = small_service.base_url
    account = await create_account(small_service.settings, http, base)
    start = {"type": "call.started", "call_id": "cap-1", "to": "+14155552671", "from": "+447911123456"}
    async with http.post(f"{base}/v1/events", json=start, headers=account.headers) as r:
        assert r.status == 200
    for i in range(CAP):
        body = {"type": "turn.started", "call_id": "cap-1", "role": "user" if i % 2 else "agent", "turn": i}
        async with http.post(f"{base}/v1/events", json=body, headers=account.headers) as r:
            answer = await r.json()
            assert r.status == 200 and "ignored" not in answer
    body = {"type": "turn.started", "call_id": "cap-1", "role": "user"}
    async with http.post(f"{base}/v1/events", json=body, headers=account.headers) as r:
        answer = await r.json()
    assert r.status == 200
    assert (answer["ignored"], answer["why"]) == (True, "call_turn_cap")
    assert (answer["user_turns"], answer["agent_turns"]) == (CAP // 2, CAP // 2)
    async with http.get(f"{base}/v1/calls/cap-1", headers=account.headers) as r:
        record = await r.json()
    assert record["user_turns"] + record["agent_turns"] == CAP
