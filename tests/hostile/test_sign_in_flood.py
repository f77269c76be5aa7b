"""A sign-in flood: anyone, unauthenticated, posting the dashboard's sign-in form with random emails, from one
address and from many (docs/dashboard.md, People and sessions).

The edge's own app (`init_app`) on a log in memory, behind a trusted proxy on loopback, so each post names
its client in X-Forwarded-For. The flood gets no more argon2id verifies than its limits allow, never more
than the edge's slots at once, every other try the limit's 429 at once, and another account's events are
answered meanwhile.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import msgspec
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from argon2 import PasswordHasher

from callscreen.testing import MemoryLog
from domain import commands
from domain.accounts import stamp
from infra.clock import now_ms
from infra.settings import Settings
from ingest.app import init_app
from ingest.dashboard import DASHBOARD
from ingest.dashboard_auth import BUSY, WRONG
from ingest.service import EDGE
from ingest.sessions import Hashing
from tests.service import AccountKeys

# Within the verifies an edge with two slots starts in a row (12), so the first test's are never refused for
# want of them.
ADDRESS_TRIES = 5
SLOTS = 2
CLIENTS = 64
PASSWORD = "correct horse battery staple"
SETTINGS = Settings(
    trusted_proxies="127.0.0.1, ::1, 10.0.0.0/8", sign_in_address_tries=ADDRESS_TRIES, sign_in_verify_slots=SLOTS
)
PROBLEM = re.compile(r'<p class="problem" role="alert">([^<]*)</p>')
LIMITED = re.compile(r"Too many tries\. Wait (\d+) minutes and try again\.")


@dataclass
class Dash:
    base_url: str
    app: web.Application
    log: MemoryLog

    @property
    def hashing(self) -> Hashing:
        return self.app[DASHBOARD].hashing

    async def change(self, change: commands.Change) -> dict[str, str]:
        record = stamp(change.record, now_ms())
        await self.log.append(SETTINGS.topic("accounts"), record["account_id"], msgspec.json.encode(record))
        return change.shown


@dataclass(frozen=True)
class Answer:
    status: int
    problem: str
    retry_after: str | None


@pytest.fixture
async def dash() -> AsyncIterator[Dash]:
    """An edge of its own for each test: its limits and verifies per minute are that test's."""
    log = MemoryLog(SETTINGS)
    app = init_app(SETTINGS, log)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    yield Dash(str(server.make_url("")).rstrip("/"), app, log)
    await server.close()


@pytest.fixture(scope="module")
async def browserless() -> AsyncIterator[aiohttp.ClientSession]:
    """A client with a cookie jar (the sign-in form's cookie), as a script posting the form would be."""
    connector = aiohttp.TCPConnector(limit=CLIENTS)
    async with aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
        yield session


async def form_csrf(session: aiohttp.ClientSession, dash: Dash) -> str:
    async with session.get(f"{dash.base_url}/dashboard/signin") as r:
        assert r.status == 200
        return (await r.text()).split('name="csrf" value="')[1].split('"')[0]


async def sign_in(
    session: aiohttp.ClientSession, dash: Dash, csrf: str, email: str, client: str, password: str = "guess"
) -> Answer:
    form = {"csrf": csrf, "email": email, "password": password}
    headers = {"X-Forwarded-For": client}
    async with session.post(
        f"{dash.base_url}/dashboard/signin", data=form, headers=headers, allow_redirects=False
    ) as r:
        found = PROBLEM.search(await r.text())
        return Answer(r.status, found.group(1) if found else "", r.headers.get("Retry-After"))


def random_email() -> str:
    return f"{uuid.uuid4().hex[:12]}@flood.test"


def is_limit(answer: Answer) -> bool:
    """The limit's own answer, exactly as the edge words it: 429, the minutes and Retry-After agreeing."""
    found = LIMITED.fullmatch(answer.problem)
    if answer.status != 429 or found is None or answer.retry_after is None:
        return False
    return int(found.group(1)) == (int(answer.retry_after) - 1) // 60 + 1


def is_busy(answer: Answer) -> bool:
    """No verify slot free: 429 at once, `Retry-After: 1` (a second or two more when the edge's verifies per
    minute are spent)."""
    retry = answer.retry_after or ""
    return (answer.status, answer.problem) == (429, BUSY) and retry.isdigit() and int(retry) >= 1


def is_wrong(answer: Answer) -> bool:
    return (answer.status, answer.problem, answer.retry_after) == (401, WRONG, None)


async def test_a_flood_from_one_address_gets_exactly_its_tries_of_verifies(
    dash: Dash, browserless: aiohttp.ClientSession
) -> None:
    """Rounds of 64 concurrent posts from one client, each a random email, until the address is spent: the
    edge verified exactly its limit's passwords (each one a 401), one at a time, and answered every other
    post 429 at once, busy while its one verify ran, then the limit."""
    csrf = await form_csrf(browserless, dash)
    before = dash.hashing.verifies
    dash.hashing.most_at_once = 0
    answers: list[Answer] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        wave = [sign_in(browserless, dash, csrf, random_email(), "198.51.100.7") for _ in range(CLIENTS)]
        round_answers = await asyncio.gather(*wave)
        answers += round_answers
        if all(is_limit(a) for a in round_answers):
            break
    else:
        pytest.fail("the address was never spent")
    verified = dash.hashing.verifies - before
    assert verified == ADDRESS_TRIES
    assert len([a for a in answers if is_wrong(a)]) == ADDRESS_TRIES
    assert all(is_wrong(a) or is_busy(a) or is_limit(a) for a in answers), {a for a in answers}
    assert dash.hashing.most_at_once == 1
    # The next try from there is the limit's answer; from elsewhere it is checked.
    assert is_limit(await sign_in(browserless, dash, csrf, random_email(), "198.51.100.7"))
    assert is_wrong(await sign_in(browserless, dash, csrf, random_email(), "198.51.100.8"))


# Callers far apart: a run of one prefix calling would itself be suspicious (`rotating_numbers`).
AREAS = ("212", "310", "617", "206", "305", "312", "713", "404", "503", "602", "702", "303", "202", "215", "614")


async def post_event(http: aiohttp.ClientSession, dash: Dash, account: AccountKeys, n: int) -> float:
    """One call.started, its own caller's first: an ordinary call, allowed."""
    call_id = f"quiet-{n}"
    caller = f"+1{AREAS[n % len(AREAS)]}{200 + n // len(AREAS) % 800}{n * 7919 % 10_000:04d}"
    body = {"type": "call.started", "call_id": call_id, "to": "+14155552671", "from": caller}
    headers = {"Authorization": f"Bearer {account.key}"}
    started = time.monotonic()
    async with http.post(f"{dash.base_url}/v1/events", json=body, headers=headers) as r:
        answer = await r.json()
        assert r.status == 200, answer
    assert (answer["call_id"], answer["action"]) == (call_id, "allow"), answer["reasons"]
    return time.monotonic() - started


async def new_account(dash: Dash) -> AccountKeys:
    created = await dash.change(commands.create_account("guard", "flood"))
    return AccountKeys(
        **{k: created[k] for k in ("account_id", "key", "key_id", "ingest_token", "signing_secret", "plan")}
    )


async def test_a_flood_from_many_addresses_holds_the_slots_only_and_events_are_answered(
    dash: Dash, browserless: aiohttp.ClientSession
) -> None:
    """Three rounds of 64 concurrent posts, each from an address of its own (behind two trusted proxies):
    never more than the slots' verifies at once nor more than their verifies per minute allow, each verify
    a 401 and every other post the busy 429; meanwhile another account's call.started is answered, and
    afterwards its person signs in."""
    other = await new_account(dash)
    email = f"owner-{uuid.uuid4().hex[:8]}@quiet.test"
    view = dash.app[EDGE].accounts  # the edge folds each record as it is appended (a log in memory)
    invited = await dash.change(
        commands.invite_person(
            view.accounts[other.account_id], view.people, email, "owner", now_ms(), SETTINGS.setup_link_valid_ms
        )
    )
    record = {"kind": "person.password_set", "account_id": other.account_id, "person_id": invited["person_id"]}
    await dash.change(commands.Change({**record, "password_hash": PasswordHasher().hash(PASSWORD)}, {}))

    csrf = await form_csrf(browserless, dash)
    before = dash.hashing.verifies
    dash.hashing.most_at_once = 0

    async def flood() -> list[Answer]:
        answers: list[Answer] = []
        for n in range(3):
            wave = [
                sign_in(browserless, dash, csrf, random_email(), f"203.0.{113 + n}.{i}, 10.9.9.9")
                for i in range(CLIENTS)
            ]
            answers += await asyncio.gather(*wave)
        return answers

    async with aiohttp.ClientSession() as http:
        flood_started = time.monotonic()
        flooding = asyncio.create_task(flood())
        latencies: list[float] = []
        try:
            # One call every 20 ms or so (the account's events per minute allow it), until the flood is over.
            while not flooding.done():
                latencies.append(await post_event(http, dash, other, len(latencies)))
                await asyncio.wait({flooding}, timeout=0.02)
        finally:
            answers = await flooding
    took = time.monotonic() - flood_started
    print(f"\n{len(latencies)} call.started in the {took:.1f} s flood; slowest {max(latencies) * 1000:.1f} ms")
    verified = dash.hashing.verifies - before
    # 12 in a row after a quiet spell, then one every 2.5 s (12 a minute per slot).
    assert 1 <= verified <= 6 * SLOTS + math.ceil(took / 2.5) and dash.hashing.most_at_once <= SLOTS
    assert len([a for a in answers if is_wrong(a)]) == verified
    assert all(is_wrong(a) or is_busy(a) for a in answers), {a for a in answers}
    assert latencies

    # The flood is over: the quiet account's person signs in (a 303 to the dashboard with a session) once the
    # edge's verifies per minute allow one, as its Retry-After says.
    form = {"csrf": csrf, "email": email, "password": PASSWORD}
    headers = {"X-Forwarded-For": "192.0.2.44"}
    deadline = time.monotonic() + 20
    while True:
        async with browserless.post(
            f"{dash.base_url}/dashboard/signin", data=form, headers=headers, allow_redirects=False
        ) as r:
            if r.status != 429 or time.monotonic() > deadline:
                assert (r.status, r.headers["Location"]) == (303, "/dashboard")
                assert "cs_session" in r.cookies
                break
            assert PROBLEM.search(await r.text()) is not None and BUSY in await r.text()
            retry = int(r.headers["Retry-After"])
        await asyncio.sleep(retry)
