"""Dashboard sign-in (docs/dashboard.md): argon2id passwords, session cookies, CSRF tokens and the
sign-in limit. Sessions are records on the accounts topic (domain.people); this module is the edge's
side of them: cookies in, the signed-in person out.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import ipaddress
import os
import secrets
import sys
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from aiohttp import web
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from domain.people import Person, Session
from infra.settings import Settings
from ingest.ratelimit import RateLimiter

SESSION_COOKIE = "cs_session"
# Before sign-in there is no session to tie a form to: a random cookie is, and the form repeats it.
FORM_COOKIE = "cs_form"
MIN_PASSWORD = 12
MAX_PASSWORD = 256

_hasher = PasswordHasher()  # argon2id, the library's current recommended cost
# Verifying against this when no person matches costs the same as a real check, so timing tells nothing.
_NOBODY = _hasher.hash(secrets.token_urlsafe(16))
# The lowest CPU priority (Linux's nice), for the threads that hash.
LOWEST_PRIORITY = 19
# Verifies each slot may start per minute (a slot busy a twentieth of the time at most, on average), and in
# a row after a quiet spell: enough for one address's tries back to back.
VERIFIES_PER_SLOT_MINUTE = 12
VERIFIES_PER_SLOT_BURST = 6


def _check(person: Person | None, password: str) -> bool:
    stored = person.password_hash if person is not None and person.password_hash else _NOBODY
    try:
        matched = _hasher.verify(stored, password)
    except (VerificationError, InvalidHashError):
        return False
    return matched and person is not None and bool(person.password_hash)


def _lowest_priority() -> None:
    """Run this thread, and the threads argon2 starts for its lanes (they inherit it), at the lowest priority.

    On Linux a nice value is a thread's own; elsewhere `setpriority` would lower the whole process, so it
    is left alone there.
    """
    if sys.platform == "linux":
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), LOWEST_PRIORITY)


class Hashing:
    """Every argon2id hash and verify of this edge, in `slots` threads of its own at the lowest CPU priority.

    One verify takes 64 MiB and about a quarter of a second of CPU over its four lanes, in the process that
    answers events and the gate. So at most `slots` verifies run at once, at most one for any address
    (architecture rule 5: one address's flood holds one slot), and at most 12 a minute per slot; a sign-in
    that finds none free gets no verify at all (`matches` answers None at once, and the page 429), never a
    place in a queue. The lanes run at nice 19, so whenever the event loop wants the CPU it gets it first;
    the rate bounds what they take from the memory bus and a shared core's other half, which nice cannot.

    The share is per address, not per account: a share per email's account would refuse a try while a
    colleague's is being checked, and so tell whether an email has an account.
    """

    def __init__(self, slots: int) -> None:
        self.slots = max(1, slots)
        self._threads = ThreadPoolExecutor(self.slots, "argon2", initializer=_lowest_priority)
        self._verifying: set[str] = set()
        burst = VERIFIES_PER_SLOT_BURST * self.slots
        self._budget = RateLimiter(burst, burst * 60.0 / (VERIFIES_PER_SLOT_MINUTE * self.slots))
        # Verifies started, and the most in flight at once: for the tests and the curious.
        self.verifies = 0
        self.most_at_once = 0

    @property
    def in_flight(self) -> int:
        return len(self._verifying)

    def wait_for(self, address: str) -> float:
        """0.0 when a verify for `address` could start now, else about the seconds until one could."""
        if len(self._verifying) >= self.slots or address in self._verifying:
            return 1.0
        left = self._budget.remaining("", time.monotonic())
        return 0.0 if left >= 1.0 else (1.0 - left) * self._budget.window_s / self._budget.limit

    async def matches(self, address: str, person: Person | None, password: str) -> bool | None:
        """Whether `password` is `person`'s (a missing person is checked against a dummy hash, taking as
        long); None, before any work, when no verify for `address` may start now (`wait_for`)."""
        if self.wait_for(address) > 0:
            return None
        self._budget.take("", time.monotonic())
        self._verifying.add(address)
        self.verifies += 1
        self.most_at_once = max(self.most_at_once, len(self._verifying))
        loop = asyncio.get_running_loop()
        checked = self._threads.submit(_check, person, password)

        def release(_: Future[bool]) -> None:
            # When the thread is done, not when the request is: a cancelled request's verify still runs.
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self._verifying.discard, address)

        # Added before `wrap_future` adds its own, so the slot is free again before the answer is read.
        checked.add_done_callback(release)
        return await asyncio.wrap_future(checked)

    async def hash(self, password: str) -> str:
        """A new password's hash (the setup page, behind a setup link's token): in the same threads."""
        return await asyncio.get_running_loop().run_in_executor(self._threads, _hasher.hash, password)

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)


def password_problem(password: str) -> str | None:
    if len(password) < MIN_PASSWORD:
        return f"Use at least {MIN_PASSWORD} characters."
    if len(password) > MAX_PASSWORD:
        return f"Use at most {MAX_PASSWORD} characters."
    return None


def csrf_for(secret: str) -> str:
    """The form token tied to a session token (or a form cookie): derived, so nothing is stored."""
    return hmac.new(secret.encode(), b"callscreen-csrf", hashlib.sha256).hexdigest()[:40]


def csrf_ok(secret: str | None, given: object) -> bool:
    return bool(secret) and isinstance(given, str) and hmac.compare_digest(csrf_for(str(secret)), given)


@dataclass(frozen=True)
class SignedIn:
    token: str
    session: Session
    person: Person

    @property
    def csrf(self) -> str:
        return csrf_for(self.token)


class SignInLimits:
    """Tries per email, and failed tries per address, on this edge (by default 10 each per 10 minutes).

    An address's successful sign-ins do not count: people behind one office's address must not lock each
    other out, while guessing across many emails from one address still stops at its limit. A try is
    charged to both before its password is checked (`take`), all at once on the event loop, so tries that
    arrive together cannot all pass on the same remaining count; a success gives the address its try back.
    Each table tracks at most `sign_in_tracked_max` subjects (ingest.ratelimit.RateLimiter).
    """

    def __init__(self, settings: Settings) -> None:
        most = settings.sign_in_tracked_max
        self.by_email = RateLimiter(settings.sign_in_email_tries, settings.sign_in_email_window_min * 60, most)
        self.by_address = RateLimiter(settings.sign_in_address_tries, settings.sign_in_address_window_min * 60, most)

    def address_wait(self, address: str) -> float:
        """The seconds until `address` may try again (0.0: now), counting nothing."""
        left = self.by_address.remaining(address, time.monotonic())
        return 0.0 if left >= 1.0 else (1.0 - left) * self.by_address.window_s / self.by_address.limit

    def take(self, email: str, address: str) -> float:
        """0.0 when this try may go ahead, and it is counted against the email and the address; else the
        seconds to wait, and nothing is counted."""
        now = time.monotonic()
        wait = self.by_address.take(address, now)
        if wait > 0:
            return wait
        wait = self.by_email.take(email, now)
        if wait > 0:
            self.by_address.refund(address, now)
        return wait

    def succeeded(self, address: str) -> None:
        """The try signed in: it does not count against its address."""
        self.by_address.refund(address, time.monotonic())

    def untried(self, email: str, address: str) -> None:
        """The try was taken but its password never checked (no verify slot): it counts against neither."""
        now = time.monotonic()
        self.by_email.refund(email, now)
        self.by_address.refund(address, now)


IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def trusted_networks(setting: str) -> tuple[IpNetwork, ...]:
    """`trusted_proxies`: addresses and networks, comma-separated (a wrong one stops the edge's start)."""
    return tuple(ipaddress.ip_network(part.strip(), strict=False) for part in setting.split(",") if part.strip())


def _ip(text: str) -> IpAddress | None:
    """An address as a peer or a proxy writes it: `192.0.2.1`, `192.0.2.1:5060`, `2001:db8::1`, `[2001:db8::1]:443`."""
    text = text.strip()
    if text.startswith("["):
        text = text[1:].split("]", 1)[0]
    elif text.count(":") == 1:
        text = text.split(":", 1)[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _subject(address: IpAddress) -> str:
    """What the limit counts: an IPv4 address, or an IPv6 address's /64 (one subscriber's, usually)."""
    if isinstance(address, ipaddress.IPv6Address):
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


def client_address(peer: str | None, forwarded: Iterable[str], trusted: tuple[IpNetwork, ...]) -> str:
    """The address a sign-in is counted against.

    The peer's, unless the peer is one of the `trusted` proxies: then the right-most X-Forwarded-For entry
    that is not (each proxy appends the address it was reached from, and only the trusted ones' entries
    can be believed). Every entry trusted: the left-most. An entry that is not an address ends the walk at
    the trusted one after it, as does a missing header. `forwarded` is the headers' values, in order.
    """
    address = _ip(peer or "")
    if address is None:
        return peer or "unknown"
    if not trusted or not any(address in network for network in trusted):
        return _subject(address)
    hops = [hop for value in forwarded for hop in value.split(",")]
    for hop in reversed(hops):
        found = _ip(hop)
        if found is None:
            break
        address = found
        if not any(address in network for network in trusted):
            break
    return _subject(address)


class IdleClock:
    """When each session was last used on this edge; a session idle for `idle_ms` is over.

    Another edge's use is not seen here, so the idle time counts from the later of the session's start and
    its last use on this edge.
    """

    def __init__(self, idle_ms: int) -> None:
        self.idle_ms = idle_ms
        self.seen: dict[str, int] = {}

    def alive(self, token: str, session: Session, now_ms: int) -> bool:
        last = max(session.started_at, self.seen.get(token, 0))
        if now_ms - last >= self.idle_ms:
            self.seen.pop(token, None)
            return False
        self.seen[token] = now_ms
        return True


def set_session_cookie(response: web.StreamResponse, token: str, secure: bool) -> None:
    response.set_cookie(SESSION_COOKIE, token, httponly=True, samesite="Lax", secure=secure, path="/dashboard")


def clear_session_cookie(response: web.StreamResponse) -> None:
    response.del_cookie(SESSION_COOKIE, path="/dashboard")
