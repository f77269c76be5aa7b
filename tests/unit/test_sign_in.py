"""Sign-in under a flood (ingest.sessions, ingest.ratelimit): tries counted before their password is checked,
a few argon2id verifies at once and one per address, limiter tables that forget, and the client's address
behind a trusted proxy (docs/dashboard.md, People and sessions)."""

from __future__ import annotations

import asyncio
import ipaddress
import os
import sys
import threading

import pytest

from domain.people import Person
from infra.settings import Settings, load_settings
from ingest import sessions
from ingest.dashboard import Dashboard
from ingest.ratelimit import RateLimiter
from ingest.sessions import Hashing, SignInLimits, client_address, trusted_networks


async def test_tries_that_arrive_together_pass_only_up_to_the_address_limit() -> None:
    """40 tries from one address, each with its own email, all in flight before any check ends: exactly the
    address's limit reach the check (counted on arrival, not after the check)."""
    limits = SignInLimits(Settings(sign_in_address_tries=5))
    arrived, checks_done = 0, asyncio.Event()
    checked: list[int] = []

    async def one(n: int) -> int:
        nonlocal arrived
        arrived += 1
        if arrived == 40:
            checks_done.set()
        if limits.take(f"p{n}@x.com", "198.51.100.7") > 0:
            return 429
        checked.append(n)
        await checks_done.wait()  # the verify, in flight until every try has arrived
        return 401

    statuses = await asyncio.gather(*(one(n) for n in range(40)))
    assert len(checked) == 5
    assert sorted(statuses) == [401] * 5 + [429] * 35
    assert limits.take("late@x.com", "198.51.100.7") > 0
    assert limits.take("late@x.com", "198.51.100.8") == 0.0


def test_asking_whether_an_address_may_try_counts_nothing() -> None:
    limits = SignInLimits(Settings(sign_in_address_tries=2, sign_in_address_window_min=2.0))
    assert limits.address_wait("198.51.100.7") == 0.0 and not limits.by_address.buckets
    assert [limits.take(f"p{n}@x.com", "198.51.100.7") for n in range(2)] == [0.0, 0.0]
    assert limits.address_wait("198.51.100.7") == pytest.approx(60.0, abs=0.5)
    assert limits.address_wait("198.51.100.7") == pytest.approx(60.0, abs=0.5)
    limits.untried("p1@x.com", "198.51.100.7")
    assert limits.address_wait("198.51.100.7") == 0.0


def test_full_buckets_are_forgotten_and_spent_ones_kept() -> None:
    limiter = RateLimiter(limit=10, window_s=60.0)
    for n in range(1000):
        limiter.take(f"random-{n}@x.com", n * 0.001)
    assert len(limiter.buckets) == 1000
    # A window later every one of them is full again, and a full bucket is what a new subject gets.
    assert limiter.take("next@x.com", 61.0) == 0.0
    assert list(limiter.buckets) == ["next@x.com"]
    small = RateLimiter(limit=2, window_s=60.0)
    small.take("spent", 0.0)
    small.take("spent", 0.0)
    small.take("other", 10.0)
    assert small.take("third", 31.0) == 0.0  # "spent" has one token back by now, not two: kept
    assert list(small.buckets) == ["spent", "other", "third"]
    assert small.take("spent", 31.0) == 0.0
    assert small.take("spent", 31.0) == pytest.approx(29.0)
    assert small.take("fourth", 100.0) == 0.0
    assert list(small.buckets) == ["fourth"]


def test_the_table_is_bounded_least_recently_seen_first() -> None:
    limiter = RateLimiter(limit=10, window_s=600.0, max_subjects=100)
    limiter.take("victim@x.com", 0.0)
    for n in range(99):
        limiter.take(f"random-{n}@x.com", 1.0)
    limiter.take("victim@x.com", 2.0)  # seen again: the most recent now
    for n in range(99, 10_000):
        limiter.take(f"random-{n}@x.com", 3.0)
        assert len(limiter.buckets) <= 100
    assert len(limiter.buckets) == 100
    assert "victim@x.com" not in limiter.buckets and "random-9999@x.com" in limiter.buckets
    limiter.take("random-9999@x.com", 3.0)
    assert len(limiter.buckets) == 100


def test_a_refund_gives_one_token_back_and_never_more_than_the_limit() -> None:
    limiter = RateLimiter(limit=2, window_s=60.0)
    assert [limiter.take("a", 0.0) for _ in range(3)] == [0.0, 0.0, 30.0]
    limiter.refund("a", 0.0)
    assert limiter.take("a", 0.0) == 0.0
    limiter.refund("b", 0.0)
    assert limiter.remaining("b", 0.0) == 2.0


@pytest.fixture
def held_checks(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, list[str]]:
    """The argon2 check replaced by one that waits for the test's word, and counts."""
    release, seen = threading.Event(), []

    def check(person: Person | None, password: str) -> bool:
        seen.append(password)
        assert release.wait(10)
        return False

    monkeypatch.setattr(sessions, "_check", check)
    return release, seen


async def test_at_most_the_slots_verify_at_once_and_the_rest_are_refused_at_once(
    held_checks: tuple[threading.Event, list[str]],
) -> None:
    release, seen = held_checks
    hashing = Hashing(2)
    try:
        tries = [asyncio.ensure_future(hashing.matches(f"203.0.113.{n}", None, f"pw{n}")) for n in range(10)]
        assert await asyncio.gather(*tries[2:]) == [None] * 8  # answered while both slots are still held
        assert not any(t.done() for t in tries[:2]) and hashing.in_flight == 2
        release.set()
        assert await asyncio.gather(*tries[:2]) == [False, False]
        assert sorted(seen) == ["pw0", "pw1"]
        assert (hashing.verifies, hashing.most_at_once, hashing.in_flight) == (2, 2, 0)
        # Slots free again: the next try is checked.
        assert await hashing.matches("203.0.113.99", None, "again") is False
    finally:
        hashing.close()


async def test_one_address_holds_one_slot(held_checks: tuple[threading.Event, list[str]]) -> None:
    release, seen = held_checks
    hashing = Hashing(4)
    try:
        first = asyncio.ensure_future(hashing.matches("198.51.100.7", None, "one"))
        await asyncio.sleep(0)  # its first step: the slot claimed
        assert await hashing.matches("198.51.100.7", None, "two") is None
        other = asyncio.ensure_future(hashing.matches("198.51.100.8", None, "three"))
        await asyncio.sleep(0)
        assert hashing.in_flight == 2
        release.set()
        assert list(await asyncio.gather(first, other)) == [False, False]
        assert sorted(seen) == ["one", "three"]
    finally:
        hashing.close()


async def test_each_slot_starts_at_most_12_verifies_a_minute(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two slots: 12 verifies in a row after a quiet spell, then one every 2.5 seconds."""
    monkeypatch.setattr(sessions, "_check", lambda person, password: False)
    hashing = Hashing(2)
    try:
        answers = [await hashing.matches(f"203.0.113.{n}", None, "pw") for n in range(13)]
        assert answers == [False] * 12 + [None]
        assert hashing.verifies == 12
        assert hashing.wait_for("203.0.113.200") == pytest.approx(2.5, abs=0.1)
    finally:
        hashing.close()


async def test_a_real_verify_matches_only_the_password() -> None:
    hashing = Hashing(2)
    try:
        stored = await hashing.hash("correct horse battery staple")
        person = Person("prs_x", "acct_x", "a@x.com", "owner", password_hash=stored)
        assert await hashing.matches("192.0.2.1", person, "correct horse battery staple") is True
        assert await hashing.matches("192.0.2.1", person, "wrong horse battery staple") is False
        assert await hashing.matches("192.0.2.1", None, "correct horse battery staple") is False
    finally:
        hashing.close()


@pytest.mark.skipif(sys.platform != "linux", reason="a nice value of one thread only is Linux's")
async def test_hashing_threads_run_at_the_lowest_priority() -> None:
    hashing = Hashing(1)
    try:
        loop = asyncio.get_running_loop()

        def nice() -> int:
            return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

        assert await loop.run_in_executor(hashing._threads, nice) == sessions.LOWEST_PRIORITY
        assert nice() == os.getpriority(os.PRIO_PROCESS, 0)  # the event loop's thread is left alone
    finally:
        hashing.close()


PROXIES = trusted_networks("10.0.0.0/8, 127.0.0.1 ,::1")


def test_without_trusted_proxies_the_peer_is_the_client() -> None:
    assert client_address("192.0.2.9", ["198.51.100.1"], ()) == "192.0.2.9"
    assert client_address("192.0.2.9", ["198.51.100.1"], PROXIES) == "192.0.2.9"  # the peer is no proxy of ours
    assert client_address(None, [], ()) == "unknown"


def test_behind_trusted_proxies_the_right_most_untrusted_entry_is_the_client() -> None:
    # Whatever the client wrote itself is left of what our proxies appended.
    assert client_address("127.0.0.1", ["6.6.6.6, 198.51.100.1, 10.1.2.3"], PROXIES) == "198.51.100.1"
    assert client_address("10.0.0.2", ["6.6.6.6", "198.51.100.1", "10.1.2.3"], PROXIES) == "198.51.100.1"
    assert client_address("10.0.0.2", ["10.0.0.5, 10.0.0.4"], PROXIES) == "10.0.0.5"  # all ours: the left-most
    assert client_address("10.0.0.2", [], PROXIES) == "10.0.0.2"
    assert client_address("10.0.0.2", ["198.51.100.1, nonsense"], PROXIES) == "10.0.0.2"
    assert client_address("::1", ["198.51.100.1:5060"], PROXIES) == "198.51.100.1"
    assert client_address("::ffff:127.0.0.1", ["[2001:db8:1:2::7]:443"], PROXIES) == "2001:db8:1:2::/64"


def test_an_ipv6_client_is_counted_by_its_64() -> None:
    assert client_address("2001:db8:1:2::7", [], ()) == "2001:db8:1:2::/64"
    assert client_address("2001:db8:1:2:ffff::1", [], ()) == "2001:db8:1:2::/64"
    assert client_address("::ffff:192.0.2.9", [], ()) == "192.0.2.9"


def test_trusted_proxies_are_addresses_or_networks() -> None:
    assert trusted_networks("") == ()
    assert trusted_networks("192.0.2.1,10.0.0.0/8") == (
        ipaddress.ip_network("192.0.2.1/32"),
        ipaddress.ip_network("10.0.0.0/8"),
    )
    with pytest.raises(ValueError):
        trusted_networks("10.0.0.0/8, proxy.example.com")


def test_the_sign_in_settings_reach_the_dashboard() -> None:
    defaults = load_settings({})
    assert (defaults.sign_in_verify_slots, defaults.sign_in_tracked_max, defaults.trusted_proxies) == (2, 50_000, "")
    settings = load_settings(
        {
            "CALLSCREEN_SIGN_IN_VERIFY_SLOTS": "3",
            "CALLSCREEN_SIGN_IN_TRACKED_MAX": "7",
            "CALLSCREEN_TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.1",
        }
    )
    dashboard = Dashboard(settings)
    try:
        assert dashboard.hashing.slots == 3
        assert dashboard.limits.by_email.max_subjects == dashboard.limits.by_address.max_subjects == 7
        assert dashboard.trusted == trusted_networks("10.0.0.0/8,192.0.2.1")
    finally:
        dashboard.hashing.close()
