"""Where the service may send outbound requests (alert webhooks, the gate's forwards; docs/api.md, Alert
delivery): https, an allowed port, and public addresses unless the deployment allows private ones."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from urllib.parse import urlsplit

from aiohttp.resolver import AsyncResolver

from infra.settings import Settings

ANY_PORT = "*"
DEFAULT_PORT = 443
# IPv6 ranges that carry an IPv4 address: a connection to them reaches that IPv4 host, so they are only as
# public as the address inside (RFC 6052 NAT64, RFC 8215 local-use NAT64, RFC 3056 6to4, RFC 4380 Teredo).
NAT64 = ipaddress.ip_network("64:ff9b::/96")
NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
# Where RFC 6052 places the IPv4 address for each prefix length a local-use NAT64 network may choose.
NAT64_LOCAL_PREFIXES = (48, 56, 64, 96)


def _rfc6052_ipv4(ip: ipaddress.IPv6Address, prefix: int) -> ipaddress.IPv4Address:
    """The IPv4 address RFC 6052 embeds after a `prefix`-bit NAT64 prefix (bits 64-71 are always skipped)."""
    value = int(ip)
    without_u = (value >> 64 << 56) | (value & ((1 << 56) - 1))  # 120 bits: bits 64-71 removed
    start = prefix if prefix <= 64 else prefix - 8
    return ipaddress.IPv4Address((without_u >> (120 - start - 32)) & 0xFFFFFFFF)


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """Every IPv4 address a connection to `ip` may reach instead of `ip` itself; empty for plain IPv6."""
    if ip.ipv4_mapped is not None:
        return [ip.ipv4_mapped]
    if ip in NAT64:
        return [_rfc6052_ipv4(ip, 96)]
    if ip in NAT64_LOCAL:
        # The operator picks the prefix length, which the address does not tell: every reading must pass.
        return [_rfc6052_ipv4(ip, prefix) for prefix in NAT64_LOCAL_PREFIXES]
    if ip.sixtofour is not None:
        return [ip.sixtofour]
    if ip.teredo is not None:
        return list(ip.teredo)
    if ip in IPV4_COMPATIBLE and int(ip) > 1:
        return [ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)]
    return []


def is_public(address: str) -> bool:
    """True for a globally routable unicast address, seeing through IPv6 forms that carry an IPv4 one."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address):
        inside = embedded_ipv4(ip)
        if inside:
            return all(v4.is_global and not v4.is_multicast for v4 in inside)
    return ip.is_global and not ip.is_multicast


def port_allowed(port: int, allowed: str) -> bool:
    """Whether `port` is in the deployment's `webhook_ports` list ("443,8443"; "*" allows any)."""
    if allowed.strip() == ANY_PORT:
        return True
    return port in {int(p) for p in allowed.split(",") if p.strip()}


def tls_context(ca_file: str) -> ssl.SSLContext:
    """System trust, plus the deployment's extra CA file when it names one; verification always on."""
    context = ssl.create_default_context()
    if ca_file:
        context.load_verify_locations(ca_file)
    return context


def target_allowed(url: str, ports: str, allow_private: bool) -> bool:
    """The checks a resolver cannot make: the port, and an IP literal (aiohttp connects to those unresolved)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or DEFAULT_PORT
    except ValueError:
        return False
    if parts.scheme != "https" or not host or not port_allowed(port, ports):
        return False
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        return True
    return allow_private or is_public(str(literal))


async def refusal(url: object, allow_private: bool, ports: str, dns_timeout_s: float) -> str | None:
    """Why the URL is refused, or None when it is acceptable."""
    if not isinstance(url, str) or len(url) > 2048:
        return "not_a_url"
    try:
        # urlsplit itself refuses some URLs (an unbalanced IPv6 bracket); hostname and port others.
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port or DEFAULT_PORT
    except ValueError:
        return "not_a_url"
    if parts.scheme != "https":
        return "not_https"
    if not host or parts.username or parts.password:
        return "not_a_url"
    if not port_allowed(port, ports):
        return "port_not_allowed"
    if allow_private:
        return None
    # A c-ares query (aiodns), as at delivery (infra/resolver.py): one that never answers holds no thread.
    resolver = AsyncResolver()
    try:
        found = await asyncio.wait_for(resolver.resolve(host, port, socket.AF_UNSPEC), dns_timeout_s)
    except (OSError, UnicodeError, TimeoutError):
        return "unresolvable"
    finally:
        await resolver.close()
    addresses = {str(result["host"]) for result in found}
    if not addresses or not all(is_public(a) for a in addresses):
        return "private_address"
    return None


async def refusal_under(settings: Settings, url: object) -> str | None:
    """Why the deployment refuses `url` as a webhook or forward target (its ports, private addresses and
    DNS time-out), or None."""
    return await refusal(url, settings.webhook_allow_private, settings.webhook_ports, settings.webhook_dns_timeout_s)
