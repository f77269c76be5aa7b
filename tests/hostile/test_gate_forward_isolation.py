"""A hung platform and forged gate posts fill one account's share of forwards and no other's
(docs/architecture.md, rule 5; docs/api.md, The carrier gate).

Account A's number forwards to a platform that never answers, and A's gate gets more calls than its
share: the excess get the apology at once, not after the forward time-out. Account C forwards to the
same hung host and meets the host's share. Account B's platform answers, and B's call is forwarded and
relayed at once, with no `platform.degraded`. A refused forward never reached a platform, so it is no
`gate.forwarded` fact.
"""

from __future__ import annotations

import asyncio
import re
import time
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson
import pytest
import trustme
from aiohttp import web

from tests.gate_stand_ins import PLATFORM_TWIML, Platform
from tests.receiver import https_site, receiver_env
from tests.service import RunningService, running_service, settled
from tests.test_gate import (
    AREAS,
    Gated,
    alerts_of,
    gated,
    post_form,
    sid,
    verbs,
    voice_form,
)
from tests.topics import read_topic

pytestmark = [pytest.mark.pipeline, pytest.mark.slow]

PER_ACCOUNT = 2
PER_HOST = 3
# Far longer than any answer here: a hung forward ends only when the test releases it, never by the
# time-out, so the shares stay full for as long as the test needs them full.
FORWARD_TIMEOUT_S = 60
# The gate's own answer, scored on the real pipeline, on a shared machine: well inside the time-out.
PROMPT_S = 5.0
APOLOGY = (200, ["Say", "Hangup"])


@dataclass
class HungPlatform:
    """A voice URL that takes the form and answers nothing until `release` (then 500)."""

    url: str = ""
    arrived: list[bytes] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.Response:
        self.arrived.append(await request.read())
        await self.release.wait()
        return web.Response(status=500)


@pytest.fixture(scope="module")
def shares_service(
    kafka: str, tmp_path_factory: pytest.TempPathFactory, webhook_ca: tuple[trustme.CA, Path]
) -> Iterator[RunningService]:
    env = {
        **receiver_env(webhook_ca[1]),
        "CALLSCREEN_GATE_FORWARDS_PER_ACCOUNT": str(PER_ACCOUNT),
        "CALLSCREEN_GATE_FORWARDS_PER_HOST": str(PER_HOST),
        "CALLSCREEN_GATE_FORWARD_TIMEOUT_S": str(FORWARD_TIMEOUT_S),
    }
    with running_service(tmp_path_factory.mktemp("gate-shares") / "data", kafka, env=env) as running:
        yield running


@pytest.fixture
async def hung(webhook_ca: tuple[trustme.CA, Path]) -> AsyncIterator[HungPlatform]:
    stand_in = HungPlatform()
    async with https_site(webhook_ca[0], stand_in.handle) as url:
        stand_in.url = url
        try:
            yield stand_in
        finally:
            stand_in.release.set()


@pytest.fixture
async def answering(webhook_ca: tuple[trustme.CA, Path]) -> AsyncIterator[Platform]:
    stand_in = Platform()
    async with https_site(webhook_ca[0], stand_in.handle) as url:
        stand_in.url = url
        yield stand_in


async def arrivals(platform: HungPlatform, count: int) -> None:
    deadline = time.monotonic() + PROMPT_S * 2
    while len(platform.arrived) < count:
        assert time.monotonic() < deadline, f"{len(platform.arrived)} forwards reached the hung platform, not {count}"
        await asyncio.sleep(0.02)


async def call(http: aiohttp.ClientSession, gate: Gated, call_sid: str, area: int) -> tuple[int, list[str]]:
    """An incoming call to the gate the score allows (a passed STIR attestation, a caller of its own)."""
    form = voice_form(call_sid, f"+1{AREAS[area]}5550160", StirVerstat="TN-Validation-Passed-A")
    status, _, root = await post_form(http, gate.url, form)
    return status, verbs(root)


async def prompt(http: aiohttp.ClientSession, gate: Gated, call_sid: str, area: int) -> tuple[int, list[str]]:
    return await asyncio.wait_for(call(http, gate, call_sid, area), PROMPT_S)


async def refused_counts(http: aiohttp.ClientSession, service: RunningService) -> dict[str, float]:
    async with http.get(f"{service.base_url}/metrics") as r:
        text = await r.text()
    found = re.findall(r'^callscreen_gate_forwards_refused_total\{reason="(\w+)"\} (\S+)$', text, re.MULTILINE)
    return {reason: float(value) for reason, value in found}


async def test_a_hung_platform_fills_its_own_accounts_share_and_another_account_is_forwarded_at_once(
    shares_service: RunningService,
    hung: HungPlatform,
    answering: Platform,
    http: aiohttp.ClientSession,
) -> None:
    a = await gated(shares_service, http, forward_url=f"{hung.url}/voice")
    c = await gated(shares_service, http, forward_url=f"{hung.url}/voice")
    b = await gated(shares_service, http, forward_url=f"{answering.url}/voice")
    held_a = [sid() for _ in range(PER_ACCOUNT)]
    held_c = sid()
    refused_a, refused_c, b_sid = sid(), sid(), sid()
    pending = [asyncio.create_task(call(http, a, s, n)) for n, s in enumerate(held_a)]
    try:
        await arrivals(hung, PER_ACCOUNT)
        # A's share is full: its next call gets the apology at once, not after the forward's time-out.
        assert await prompt(http, a, refused_a, PER_ACCOUNT) == APOLOGY
        # C's share has room, the host's does not once C's first forward hangs beside A's two.
        pending.append(asyncio.create_task(call(http, c, held_c, 0)))
        await arrivals(hung, PER_HOST)
        assert await prompt(http, c, refused_c, 1) == APOLOGY
        # B's platform answers: B's call is forwarded and relayed byte for byte, at once.
        form = voice_form(b_sid, StirVerstat="TN-Validation-Passed-A")

        async def relayed() -> tuple[int, str, bytes]:
            async with http.post(b.url, data=form) as r:
                return r.status, r.content_type, await r.read()

        assert await asyncio.wait_for(relayed(), PROMPT_S) == (200, "application/xml", PLATFORM_TWIML)
        assert verbs(ET.fromstring(PLATFORM_TWIML)) == ["Connect"]
        assert [p for p, _, body in answering.received if b_sid.encode() in body] == ["/voice"]
        # The refused forwards never reached the hung platform; the held ones are still out.
        assert len(hung.arrived) == PER_HOST
        assert not any(task.done() for task in pending)
        assert await refused_counts(http, shares_service) == {"account_full": 1.0, "host_full": 1.0}
    finally:
        hung.release.set()
        _, late = await asyncio.wait(pending, timeout=PROMPT_S * 2)
        for task in late:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    assert not late, "the released forwards did not end"
    # Released, the hung platform answers 500: a failed forward, the apology.
    assert [task.result() for task in pending] == [APOLOGY] * PER_HOST

    await settled(shares_service.settings)
    assert await alerts_of(http, b, "platform.degraded") == []
    events = [
        orjson.loads(r.value)
        for r in await read_topic(shares_service.settings, shares_service.settings.topic("events"))
    ]
    forwarded = {
        (e["account_id"], e["call_id"]): e["failed"]
        for e in events
        if e.get("type") == "gate.forwarded"
        and e["account_id"] in {a.account.account_id, b.account.account_id, c.account.account_id}
    }
    # Every forward that was sent is recorded; the two refused at once are not.
    assert forwarded == {
        **{(a.account.account_id, s): True for s in held_a},
        (c.account.account_id, held_c): True,
        (b.account.account_id, b_sid): False,
    }
