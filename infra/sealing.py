"""Webhook signing secrets at rest: sealed with the deployment's secret key before they reach the
accounts topic, opened only where a plaintext secret is needed (README, Secrets at rest).

The key is a list of Fernet keys (`secret_key`, comma-separated, or `secret_key_file`, one a line):
the first seals, every one opens, so a new key goes first and an old one stays listed while records
sealed with it are still needed. A stored secret is `fernet:<token>`; a plain `whsec_…` written
before sealing existed is read as it is.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from infra.settings import Settings

PREFIX = "fernet:"
KEY_FILE = "secret.key"


class SecretKeyProblem(Exception):
    """No usable secret key, or a sealed secret none of the keys opens; the message names no key."""


class Sealer:
    """Seals and opens signing secrets with an ordered list of Fernet keys."""

    def __init__(self, keys: list[str]) -> None:
        if not keys:
            raise SecretKeyProblem("the secret key list is empty")
        try:
            self._fernet = MultiFernet([Fernet(key.encode()) for key in keys])
        except ValueError:
            # Fernet's own message is generic; the key itself is never repeated.
            raise SecretKeyProblem("a secret key is not a Fernet key (32 url-safe base64-encoded bytes)") from None

    def seal(self, secret: str) -> str:
        """The stored form of `secret`, under the first key."""
        return PREFIX + self._fernet.encrypt(secret.encode()).decode()

    def open(self, stored: str) -> str:
        """The plaintext of a stored secret; a value without the prefix is a plain one from before sealing."""
        if not stored.startswith(PREFIX):
            return stored
        try:
            return self._fernet.decrypt(stored[len(PREFIX) :].encode()).decode()
        except InvalidToken:
            raise SecretKeyProblem("a sealed signing secret opens with none of the secret keys") from None


# Record fields holding a secret needed back in plain text: sealed before the record is appended.
SEALED_FIELDS = ("signing_secret", "carrier_auth_token", "integration_secret")


def sealed(record: dict[str, Any], sealer: Callable[[], Sealer]) -> dict[str, Any]:
    """The record with each secret field sealed; `sealer` is asked for only when there is one, so changes
    that carry no secret need no key."""
    for name in SEALED_FIELDS:
        if record.get(name):
            record = {**record, name: sealer().seal(record[name])}
    return record


def key_file(settings: Settings) -> Path:
    return Path(settings.secret_key_file or Path(settings.data_dir) / KEY_FILE)


def parse_keys(text: str) -> list[str]:
    """Keys separated by commas or newlines, in order; blanks and `#` comment lines are skipped."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    return [key.strip() for line in lines for key in line.split(",") if key.strip()]


def keys_of(settings: Settings) -> list[str]:
    """The deployment's keys: `secret_key` when set, else the key file's, else none."""
    if settings.secret_key:
        return parse_keys(settings.secret_key)
    path = key_file(settings)
    if not path.exists():
        return []
    return parse_keys(path.read_text())


def sealer_for(settings: Settings) -> Sealer:
    """The deployment's sealer; SecretKeyProblem when it has no key."""
    keys = keys_of(settings)
    if not keys:
        raise SecretKeyProblem(
            f"no secret key: set CALLSCREEN_SECRET_KEY or CALLSCREEN_SECRET_KEY_FILE, or run this where "
            f"`callscreen run` made {key_file(settings)}"
        )
    return Sealer(keys)


def ensure_key(settings: Settings) -> Path | None:
    """Make a key file (mode 0600) when the deployment names no key and has none yet; the path made, or None."""
    path = key_file(settings)
    if settings.secret_key or path.exists():
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    # O_EXCL: two processes starting at once must not each write a different key.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return None
    with os.fdopen(fd, "w") as handle:
        handle.write(Fernet.generate_key().decode() + "\n")
    return path
