"""Outbound DNS (alert deliveries, the gate's forwards): only public addresses reach the connector, and a
lookup has a deadline.

Checking a URL when it is set is not enough: its name may resolve elsewhere by the time an alert is sent
(DNS rebinding). aiohttp connects only to what its resolver returns, so filtering here decides where a
delivery can connect. IP literals never reach a resolver; `infra.webhook_url.target_allowed` checks those.
"""

from __future__ import annotations

import asyncio
import socket

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from infra.webhook_url import is_public


class NoPublicAddress(OSError):
    """Every address the name resolved to is private, reserved or otherwise not global."""


class PublicResolver(AbstractResolver):
    """Wraps another resolver: a lookup over `timeout_s` raises TimeoutError, non-global addresses are dropped
    (unless `allow_private`), and a name left with none raises NoPublicAddress."""

    def __init__(self, timeout_s: float, allow_private: bool, inner: AbstractResolver | None = None) -> None:
        self.timeout_s = timeout_s
        self.allow_private = allow_private
        self.inner = inner or DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await asyncio.wait_for(self.inner.resolve(host, port, family), self.timeout_s)
        if self.allow_private:
            return found
        public = [result for result in found if is_public(result["host"])]
        if not public:
            raise NoPublicAddress(f"no public address for {host}")
        return public

    async def close(self) -> None:
        await self.inner.close()
