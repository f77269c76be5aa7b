"""Outbound DNS (alert deliveries, the gate's forwards): only public addresses reach the connector, a lookup
has a deadline, and a name that just failed is not asked again for a while.

Checking a URL when it is set is not enough: its name may resolve elsewhere by the time an alert is sent
(DNS rebinding). aiohttp connects only to what its resolver returns, so filtering here decides where a
delivery can connect. IP literals never reach a resolver; `infra.webhook_url.target_allowed` checks those.

Lookups are c-ares queries (aiodns), not `getaddrinfo` on a thread pool: a name server that never answers
holds no thread, so one account's black-holed host name delays only the deliveries to that name, not every
other account's lookups behind it (docs/architecture.md, rule 5). What a lookup does hold, a query in
flight, is bounded per account by the callers' own shares (`webhook_account_concurrency`,
`gate_forwards_per_account`). A name that failed or timed out is answered from a negative cache for
`negative_ttl_s` without a query; the cache is bounded, the oldest failure going first, so an account that
fills it costs another at most one more lookup of a name that was already failing.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

import aiodns
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import AsyncResolver

from infra.settings import Settings
from infra.webhook_url import is_public

# How long a failed name is answered as unresolvable, and how many such names are kept.
NEGATIVE_TTL_S = 30.0
NEGATIVE_CACHE_SIZE = 4096


class NoPublicAddress(OSError):
    """Every address the name resolved to is private, reserved or otherwise not global."""


def c_ares(timeout_s: float, nameservers: Sequence[str] | None = None) -> AsyncResolver:
    """aiohttp's aiodns resolver on a channel of its own: one try per name server within `timeout_s`, and the
    system's name servers unless `nameservers` names others (`"127.0.0.1:5353"`, for tests)."""
    return AsyncResolver(nameservers=list(nameservers) if nameservers else None, timeout=timeout_s, tries=1)


def _timed_out(exc: BaseException) -> bool:
    """A lookup that ended for want of an answer: our deadline, or c-ares' own (AsyncResolver raises an
    OSError caused by the DNSError)."""
    if isinstance(exc, TimeoutError):
        return True
    cause = exc.__cause__
    return isinstance(cause, aiodns.error.DNSError) and bool(cause.args) and cause.args[0] == aiodns.error.ARES_ETIMEOUT


class PublicResolver(AbstractResolver):
    """Wraps another resolver (default: c-ares through aiodns): a lookup over `timeout_s` raises TimeoutError,
    non-global addresses are dropped (unless `allow_private`), and a name left with none raises
    NoPublicAddress. A lookup that timed out or failed is remembered for `negative_ttl_s`: asked again in
    that time, the name fails at once, the same way (TimeoutError, or OSError), without a query."""

    def __init__(
        self,
        timeout_s: float,
        allow_private: bool,
        inner: AbstractResolver | None = None,
        *,
        negative_ttl_s: float = NEGATIVE_TTL_S,
        negative_cache_size: int = NEGATIVE_CACHE_SIZE,
        nameservers: Sequence[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout_s = timeout_s
        self.allow_private = allow_private
        self.inner = inner or c_ares(timeout_s, nameservers)
        self.negative_ttl_s = negative_ttl_s
        self.negative_cache_size = negative_cache_size
        self.clock = clock
        # (name, family) -> (until, timed out), oldest first.
        self.failed: OrderedDict[tuple[str, int], tuple[float, bool]] = OrderedDict()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        key = (host.rstrip(".").lower(), int(family))
        self._answer_from_cache(host, key)
        try:
            found = await asyncio.wait_for(self.inner.resolve(host, port, family), self.timeout_s)
        except OSError as exc:  # TimeoutError included; a cancelled lookup is not a failure of the name
            timed_out = _timed_out(exc)
            self._remember(key, timed_out)
            if timed_out and not isinstance(exc, TimeoutError):
                raise TimeoutError(f"no answer for {host} within {self.timeout_s:g} s") from exc
            raise
        if self.allow_private:
            return found
        public = [result for result in found if is_public(result["host"])]
        if not public:
            raise NoPublicAddress(f"no public address for {host}")
        return public

    def _answer_from_cache(self, host: str, key: tuple[str, int]) -> None:
        """Raise as the name's recent failure did, if it is still remembered."""
        entry = self.failed.get(key)
        if entry is None:
            return
        until, timed_out = entry
        if self.clock() >= until:
            del self.failed[key]
            return
        if timed_out:
            raise TimeoutError(f"no answer for {host} within the last {self.negative_ttl_s:g} s")
        raise OSError(None, f"{host} did not resolve within the last {self.negative_ttl_s:g} s")

    def _remember(self, key: tuple[str, int], timed_out: bool) -> None:
        if self.negative_ttl_s <= 0 or self.negative_cache_size <= 0:
            return
        self.failed.pop(key, None)
        self.failed[key] = (self.clock() + self.negative_ttl_s, timed_out)
        while len(self.failed) > self.negative_cache_size:
            self.failed.popitem(last=False)

    async def close(self) -> None:
        await self.inner.close()


def resolver_for(settings: Settings) -> PublicResolver:
    """The deployment's outbound resolver, for alert deliveries and the gate's forwards alike: both go where
    a webhook may go, so both read the webhook DNS settings (a name that just failed, for the same while)."""
    servers = [server.strip() for server in settings.webhook_dns_servers.split(",") if server.strip()]
    return PublicResolver(
        settings.webhook_dns_timeout_s,
        settings.webhook_allow_private,
        negative_ttl_s=settings.webhook_dns_negative_ttl_s,
        nameservers=servers or None,
    )
