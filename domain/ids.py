"""Identifiers, credentials and their digests (docs/api.md, Credentials)."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import string

BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
# A credential's body after its prefix. A compiled pattern, because every request checks one.
_BODY = re.compile(f"[{BASE62}]{{32}}")

FULL_KEY_PREFIX = "cs_live_"
READ_KEY_PREFIX = "cs_read_"
INGEST_TOKEN_PREFIX = "cs_ing_"
GATE_TOKEN_PREFIX = "cs_gate_"
SECRET_PREFIX = "whsec_"


def random_base62(length: int) -> str:
    return "".join(secrets.choice(BASE62) for _ in range(length))


def new_key(scope: str) -> str:
    return (FULL_KEY_PREFIX if scope == "full" else READ_KEY_PREFIX) + random_base62(32)


def new_ingest_token() -> str:
    return INGEST_TOKEN_PREFIX + random_base62(32)


def new_gate_token() -> str:
    return GATE_TOKEN_PREFIX + random_base62(32)


def new_signing_secret() -> str:
    return SECRET_PREFIX + random_base62(32)


def new_account_id() -> str:
    return "acct_" + random_base62(16)


def new_key_id() -> str:
    return "key_" + random_base62(12)


def digest(secret: str) -> str:
    """SHA-256 hex digest: the only form in which keys and tokens are stored."""
    return hashlib.sha256(secret.encode()).hexdigest()


def same_digest(a: str, b: str) -> bool:
    return hmac.compare_digest(a, b)


def is_well_formed(credential: str, prefix: str) -> bool:
    return credential.startswith(prefix) and _BODY.fullmatch(credential, len(prefix)) is not None


def deterministic_id(prefix: str, length: int, *parts: str) -> str:
    """A base62 id derived from its parts, so a replay of the same facts makes the same id."""
    number = int.from_bytes(hashlib.sha256("\x1f".join(parts).encode()).digest(), "big")
    chars = []
    for _ in range(length):
        number, rest = divmod(number, 62)
        chars.append(BASE62[rest])
    return prefix + "".join(chars)


def derived_event_id(*parts: str) -> str:
    """A 32-hex record id derived from its parts: the sweep's tick for a due time is the same record
    however often it is appended, so folds count it once."""
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]
