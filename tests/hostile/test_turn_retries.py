"""A turn retried after a 503 is the same turn: three copies of one caller turn count once, trip no
`repeated_turns`, and so never hang up a real caller. On older code each copy (a new event id) counted."""

from __future__ import annotations

import aiohttp

from domain.times import format_ms
from infra.clock import now_ms
from tests.service import AccountKeys


async def test_three_copies_of_one_turn_count_once(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    began = now_ms() - 10_000
    start = {
        "type": "call.started",
        "call_id": "retried-turn",
        "to": "+14155552671",
        "from": "+12125550177",
        "at": format_ms(began),
    }
    async with http.post(f"{base_url}/v1/events", json=start, headers=account.headers) as r:
        assert r.status == 200
    turn = {
        "type": "turn.ended",
        "call_id": "retried-turn",
        "role": "user",
        "turn": 1,
        "text": "I'd like to speak to someone",
        "at": format_ms(began + 4_000),
    }
    answers = []
    for _ in range(3):
        async with http.post(f"{base_url}/v1/events", json=turn, headers=account.headers) as r:
            answers.append((r.status, await r.json()))
    assert [(s, a["user_turns"], a["flags"], a.get("duplicate")) for s, a in answers] == [
        (200, 1, [], None),
        (200, 1, [], True),
        (200, 1, [], True),
    ]
    async with http.get(f"{base_url}/v1/calls/retried-turn", headers=account.headers) as r:
        record = await r.json()
    assert (record["user_turns"], record["flags"]) == (1, [])
