"""Who is asking: API keys in headers, ingest tokens in the events path, nothing else."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from domain import ids
from domain.accounts import Account, AccountsView
from domain.events import INGEST_CREDENTIAL, KEY_CREDENTIAL
from ingest.errors import ApiError


@dataclass(frozen=True)
class Principal:
    account: Account
    scope: str
    subject: str

    @property
    def can_write(self) -> bool:
        return self.scope in ("full", "ingest")

    @property
    def credential(self) -> str:
        """What the events it posts record as their credential: the ingest token's, or an API key's."""
        return INGEST_CREDENTIAL if self.scope == "ingest" else KEY_CREDENTIAL


def key_from_headers(request: web.Request) -> str | None:
    """A Bearer key, else `X-Service-Key`: a platform may send an `Authorization` of its own (Basic, or
    its own scheme) beside the key it cannot put there."""
    header = request.headers.get("Authorization")
    if header is not None:
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer":
            return value.strip()
    service_key = request.headers.get("X-Service-Key")
    if service_key is not None:
        return service_key
    return None if header is None else ""


def authenticate_key(request: web.Request, view: AccountsView) -> Principal:
    key = key_from_headers(request)
    if key is None:
        raise ApiError(401, "missing_key", headers={"WWW-Authenticate": "Bearer"})
    if not (ids.is_well_formed(key, ids.FULL_KEY_PREFIX) or ids.is_well_formed(key, ids.READ_KEY_PREFIX)):
        raise ApiError(401, "invalid_key", headers={"WWW-Authenticate": "Bearer"})
    found = view.by_key_digest(ids.digest(key))
    if found is None:
        raise ApiError(401, "invalid_key", headers={"WWW-Authenticate": "Bearer"})
    account, api_key = found
    return Principal(account=account, scope=api_key.scope, subject=api_key.key_id)


def authenticate_token(token: str, view: AccountsView) -> Principal:
    account = None
    if ids.is_well_formed(token, ids.INGEST_TOKEN_PREFIX):
        account = view.by_token_digest(ids.digest(token))
    if account is None:
        raise ApiError(401, "invalid_token")
    return Principal(account=account, scope="ingest", subject="ingest")


def require_write(principal: Principal) -> None:
    if not principal.can_write:
        raise ApiError(403, "read_only_key")
