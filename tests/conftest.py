"""Session fixtures: one real service (broker, Faust workers, edge) for the whole run."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest

from tests.service import AccountKeys, RunningService, create_account, start_service


@pytest.fixture(scope="session")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    """`callscreen run` with the embedded broker, or against CALLSCREEN_TEST_BROKER when set."""
    data_dir: Path = tmp_path_factory.mktemp("service") / "data"
    running = start_service(data_dir, os.environ.get("CALLSCREEN_TEST_BROKER", ""))
    yield running
    running.stop()


@pytest.fixture(scope="session")
def log_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    """A service of its own for the tests that restart, kill or rebuild its parts."""
    running = start_service(tmp_path_factory.mktemp("log") / "data")
    yield running
    running.stop()


@pytest.fixture(scope="session")
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def base_url(service: RunningService) -> str:
    return service.base_url


@pytest.fixture
async def account(service: RunningService, http: aiohttp.ClientSession) -> AccountKeys:
    """Each test its own account, so tests stay independent of each other."""
    return await create_account(service.settings, http, service.base_url)


@pytest.fixture
async def watch_account(service: RunningService, http: aiohttp.ClientSession) -> AccountKeys:
    return await create_account(service.settings, http, service.base_url, plan="watch")
