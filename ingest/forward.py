"""The gate's forward: the carrier's form, POSTed unchanged to the platform's own voice URL, and its TwiML.

Forwards go where alert deliveries may go (docs/api.md, Alert delivery): https, an allowed port, public
addresses only unless the deployment allows private ones, TLS verified against the system's CAs and
`webhook_ca_file`. One attempt; an answer that is not 2xx XML within the time-out counts as failed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import aiohttp

from infra.resolver import PublicResolver
from infra.settings import Settings
from infra.webhook_url import target_allowed, tls_context
from ingest.twiml import is_xml

FORM = "application/x-www-form-urlencoded"


@dataclass(frozen=True)
class Forwarded:
    """A forward's outcome: the TwiML to relay when it succeeded, and how long it took."""

    body: bytes | None
    duration_ms: int
    error: str | None = None


class Forwarder:
    """One session for every forward, opened on first use."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            settings = self.settings
            resolver = PublicResolver(settings.webhook_dns_timeout_s, settings.webhook_allow_private)
            connector = aiohttp.TCPConnector(ssl=tls_context(settings.webhook_ca_file), resolver=resolver)
            self._session = aiohttp.ClientSession(connector=connector)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def post(self, url: str, form: bytes, score: str, action: str) -> Forwarded:
        """POST the carrier's form bytes as they came; the platform's answer only when it is 2xx XML."""
        started = time.monotonic()
        settings = self.settings

        def took() -> int:
            return int((time.monotonic() - started) * 1000)

        if not target_allowed(url, settings.webhook_ports, settings.webhook_allow_private):
            return Forwarded(None, took(), "refused")
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
