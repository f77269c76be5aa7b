"""Dashboard sign-in (docs/dashboard.md): argon2id passwords, session cookies, CSRF tokens and the
sign-in limit. Sessions are records on the accounts topic (domain.people); this module is the edge's
side of them: cookies in, the signed-in person out.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import time
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


async def hash_password(password: str) -> str:
    return await asyncio.to_thread(_hasher.hash, password)


async def password_matches(person: Person | None, password: str) -> bool:
    stored = person.password_hash if person is not None and person.password_hash else _NOBODY

    def check() -> bool:
        try:
            return _hasher.verify(stored, password)
        except (VerificationError, InvalidHashError):
            return False

    matched = await asyncio.to_thread(check)
    return matched and person is not None and bool(person.password_hash)


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
    other out, while guessing across many emails from one address still stops at its limit.
    """

    def __init__(self, settings: Settings) -> None:
        self.by_email = RateLimiter(settings.sign_in_email_tries, settings.sign_in_email_window_min * 60)
        self.by_address = RateLimiter(settings.sign_in_address_tries, settings.sign_in_address_window_min * 60)

    def take(self, email: str, address: str) -> float:
        """0.0 when this try may go ahead (and it counts against the email), else the seconds to wait."""
        now = time.monotonic()
        left = self.by_address.remaining(address, now)
        if left < 1.0:
            return (1.0 - left) * self.by_address.window_s / self.by_address.limit
        return self.by_email.take(email, now)

    def failed(self, address: str) -> None:
        self.by_address.take(address, time.monotonic())


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
