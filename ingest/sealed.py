"""Opens the secrets the accounts topic holds sealed (carrier auth tokens, platform webhook secrets) with
the deployment key, read when first needed so an edge without one still starts."""

from __future__ import annotations

from aiohttp import web

from infra.sealing import Sealer, sealer_for
from ingest.service import Edge


class SealedSecrets:
    def __init__(self) -> None:
        self._sealer: Sealer | None = None

    def open(self, edge: Edge, sealed: str) -> str:
        """The secret in the clear; raises `infra.sealing.SecretKeyProblem` when the key cannot open it."""
        if self._sealer is None:
            self._sealer = sealer_for(edge.settings)
        return self._sealer.open(sealed)


SEALED: web.AppKey[SealedSecrets] = web.AppKey("sealed_secrets", SealedSecrets)
