"""Webhook signatures (docs/api.md, Alert delivery): `X-Service-Signature: t=<unix>,v1=<hex>[,v1=<hex>]`.

`v1` is the lowercase hex HMAC-SHA256 of `<t>.<raw body>` keyed with the signing secret. During a
secret rotation's overlap the header carries one `v1` per valid secret. Receivers use `verify`.
"""

from __future__ import annotations

import hashlib
import hmac

DEFAULT_TOLERANCE_S = 300


def digest(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()


def signature_header(secrets: list[str], timestamp: int, body: bytes) -> str:
    return ",".join([f"t={timestamp}", *(f"v1={digest(secret, timestamp, body)}" for secret in secrets)])


def parse_header(header: str) -> tuple[int, list[str]] | None:
    timestamp: int | None = None
    signatures: list[str] = []
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        if name == "t" and value.isdigit():
            timestamp = int(value)
        elif name == "v1" and value:
            signatures.append(value)
    if timestamp is None or not signatures:
        return None
    return timestamp, signatures


def verify(secret: str, header: str, body: bytes, now: int, tolerance_s: int = DEFAULT_TOLERANCE_S) -> bool:
    """True when one `v1` matches the body signed with `secret` and `t` is within the tolerance of `now`.

    `body` must be the raw bytes as received: re-serialising the JSON changes them.
    """
    parsed = parse_header(header)
    if parsed is None:
        return False
    timestamp, signatures = parsed
    if abs(now - timestamp) >= tolerance_s:
        return False
    expected = digest(secret, timestamp, body)
    return any(hmac.compare_digest(expected, candidate) for candidate in signatures)
