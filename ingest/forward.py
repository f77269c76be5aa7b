"""The gate's forward: the carrier's form, POSTed unchanged to the platform's own voice URL, and its TwiML.

Forwards go where alert deliveries may go (docs/api.md, Alert delivery): https, an allowed port, public
addresses only unless the deployment allows private ones, TLS verified against the system's CAs and
`webhook_ca_file`. One attempt; an answer that is not 2xx XML within the time-out counts as failed.

Every forward holds a slot of its account's share and one of its host's (docs/architecture.md, rule 5):
a platform that never answers, or forged gate posts for one account, fill that account's share and no
other's. A forward whose share is full is refused at once, never queued: a queue behind a full share is
the shared pool again, and the caller would wait out the time-out of forwards that are not its own.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp

from infra.resolver import resolver_for
from infra.settings import Settings
from infra.webhook_url import DEFAULT_PORT, target_allowed, tls_context
from ingest.shares import Shares
from ingest.twiml import is_xml

FORM = "application/x-www-form-urlencoded"
# Why a forward was refused before it was sent: its account's share, or its host's, was full.
ACCOUNT_FULL = "account_full"
HOST_FULL = "host_full"
SHARE_FULL = frozenset({ACCOUNT_FULL, HOST_FULL})


@dataclass(frozen=True)
class Forwarded:
    """A forward's outcome: the TwiML to relay when it succeeded, and how long it took."""

    body: bytes | None
    duration_ms: int
    error: str | None = None

    @property
    def shed(self) -> bool:
        """Refused for a full share: never sent, so no outcome of the platform's to record."""
        return self.error in SHARE_FULL


class ShareFull(Exception):
    """A forward's account share or host share is full (`reason`: `ACCOUNT_FULL` or `HOST_FULL`)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Slots:
    """The shares a forward holds while it is out: its account's and its host's, both or neither."""

    def __init__(self, per_account: int, per_host: int) -> None:
        self.accounts = Shares(per_account)
        self.hosts = Shares(per_host)

    @contextlib.contextmanager
    def holding(self, account_id: str, host: str) -> Iterator[None]:
        """Both slots for the block, else `ShareFull` at once; given back however the block ends,
        cancelled included. Taken without an await in between, so no other task sees half of it."""
        if not self.accounts.take(account_id):
            raise ShareFull(ACCOUNT_FULL)
        if not self.hosts.take(host):
            self.accounts.give_back(account_id)
            raise ShareFull(HOST_FULL)
        try:
            yield
        finally:
            self.hosts.give_back(host)
            self.accounts.give_back(account_id)


def since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def host_key(url: str) -> str:
    """The host a forward's share is counted against: its name and port, as the connector pools them."""
    parts = urlsplit(url)
    return f"{parts.hostname or ''}:{parts.port or DEFAULT_PORT}"


class Forwarder:
    """One session for every forward, opened on first use, and the shares its forwards hold."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.slots = Slots(settings.gate_forwards_per_account, settings.gate_forwards_per_host)
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            settings = self.settings
            resolver = resolver_for(settings)
            # No total cap: the shares bound what is in flight, and a total would be one pool that any
            # account's hung forwards could fill. The per-host cap is the host share's, so the connector
            # never queues a forward the shares let through.
            connector = aiohttp.TCPConnector(
                ssl=tls_context(settings.webhook_ca_file),
                resolver=resolver,
                limit=0,
                limit_per_host=settings.gate_forwards_per_host,
            )
            self._session = aiohttp.ClientSession(connector=connector)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def post(self, account_id: str, url: str, form: bytes, score: str, action: str) -> Forwarded:
        """POST the carrier's form bytes as they came; the platform's answer only when it is 2xx XML.
        Refused at once (`ACCOUNT_FULL`, `HOST_FULL`) when the account's or the host's share is full."""
        started = time.monotonic()
        settings = self.settings
        if not target_allowed(url, settings.webhook_ports, settings.webhook_allow_private):
            return Forwarded(None, since(started), "refused")
        try:
            with self.slots.holding(account_id, host_key(url)):
                return await self._send(url, form, score, action, started)
        except ShareFull as full:
            return Forwarded(None, since(started), full.reason)

    async def _send(self, url: str, form: bytes, score: str, action: str, started: float) -> Forwarded:
        settings = self.settings

        def took() -> int:
            return since(started)

        limit = settings.rules.limits.max_body_bytes
        timeout_s = settings.gate_forward_timeout_s
        timeout = aiohttp.ClientTimeout(total=timeout_s, ceil_threshold=timeout_s + 1)
        headers = {"Content-Type": FORM, "X-Callscreen-Score": score, "X-Callscreen-Action": action}
        try:
            async with self.session().post(
                url, data=form, headers=headers, timeout=timeout, allow_redirects=False
            ) as answer:
                if not 200 <= answer.status < 300:
                    return Forwarded(None, took(), f"status_{answer.status}")
                body = await answer.content.read(limit + 1)
        except TimeoutError:
            return Forwarded(None, took(), "timeout")
        except (aiohttp.ClientError, OSError):
            return Forwarded(None, took(), "refused")
        if len(body) > limit or not is_xml(body):
            return Forwarded(None, took(), "not_twiml")
        return Forwarded(body, took())
