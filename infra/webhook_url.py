"""Which alert webhook URLs an account may set: https, and public unless the deployment allows private."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit


def is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return ip.is_global and not ip.is_multicast


async def refusal(url: object, allow_private: bool) -> str | None:
    """Why the URL is refused, or None when it is acceptable."""
    if not isinstance(url, str) or len(url) > 2048:
        return "not_a_url"
    try:
        # urlsplit itself refuses some URLs (an unbalanced IPv6 bracket); hostname and port others.
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port or 443
    except ValueError:
        return "not_a_url"
    if parts.scheme != "https":
        return "not_https"
    if not host or parts.username or parts.password:
        return "not_a_url"
    if allow_private:
        return None
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return "unresolvable"
    addresses = {str(info[4][0]) for info in infos}
    if not addresses or not all(is_public(a) for a in addresses):
        return "private_address"
    return None
