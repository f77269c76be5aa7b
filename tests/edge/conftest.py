"""The edge alone: its aiohttp app (`init_app`) on a log in memory whose worker is the pure folds.

What the edge validates, authenticates, limits and answers is tested here in milliseconds; the same
tests' `base_url`, `account` and `watch_account` name this edge instead of the whole service.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import msgspec
import pytest
from aiohttp.test_utils import TestServer

from callscreen.testing import MemoryLog
from domain import commands
from domain.accounts import AccountsView, stamp
from infra.clock import now_ms
from infra.settings import Settings
from ingest.app import init_app
from ingest.service import EDGE
from tests.service import AccountKeys


@dataclass
class EdgeUnderTest:
    base_url: str
    log: MemoryLog
    settings: Settings
    accounts: AccountsView

    async def change(self, change: commands.Change) -> dict[str, Any]:
        """An admin command: its record appended to the accounts topic, as `callscreen` appends it."""
        record = stamp(change.record, now_ms())
        await self.log.append(self.settings.topic("accounts"), record["account_id"], msgspec.json.encode(record))
        return change.shown

    async def new_account(self, plan: str = "guard") -> AccountKeys:
        created = await self.change(commands.create_account(plan, "test"))
        return AccountKeys(
            **{k: created[k] for k in ("account_id", "key", "key_id", "ingest_token", "signing_secret", "plan")}
        )


@pytest.fixture(scope="session")
async def edge() -> AsyncIterator[EdgeUnderTest]:
    settings = Settings()
    log = MemoryLog(settings)
    app = init_app(settings, log)
    server = TestServer(app)
    await server.start_server()
    yield EdgeUnderTest(str(server.make_url("")).rstrip("/"), log, settings, app[EDGE].accounts)
    await server.close()


@pytest.fixture
def base_url(edge: EdgeUnderTest) -> str:
    return edge.base_url


@pytest.fixture
async def account(edge: EdgeUnderTest) -> AccountKeys:
    return await edge.new_account("guard")


@pytest.fixture
async def watch_account(edge: EdgeUnderTest) -> AccountKeys:
    return await edge.new_account("watch")
