"""Session fixtures: one real service (broker, Faust workers, edge) for the whole run."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest
import trustme

from callscreen.localkafka import LocalKafka
from infra.ports import free_port_block
from tests.gate_stand_ins import CARRIER_ACCOUNT_SID, CARRIER_AUTH_TOKEN, Carrier, Platform
from tests.receiver import Receiver, https_site, receiver_env, serving
from tests.service import QUICK_JVM, AccountKeys, RunningService, create_account, running_service
from tests.traffic import NO_SWEEP

# Every `callscreen run` the suite starts inherits it, and so does every Kafka such a run starts.
os.environ.setdefault("CALLSCREEN_KAFKA_JVM_OPTIONS", QUICK_JVM)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files marked `slow` first, then a file marked `last`, then the rest. `make test` hands whole
    files to its workers in collection order, so the long ones start early and the short ones fill in at
    the end; a long file that started last would leave the other workers idle for its length. The file
    marked `last` (the three-broker cluster: three JVMs more on two cores) goes after the slow files,
    beside the short ones rather than beside another broker's start-up, and before them, so that they
    fill the other workers' time while it runs (last, it left one worker idle for about 90 s)."""

    def place(item: pytest.Item) -> int:
        if item.get_closest_marker("last") is not None:
            return 1
        return 0 if item.get_closest_marker("slow") is not None else 2

    items.sort(key=place)


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One Apache Kafka for the whole run (its start-up is paid once), or CALLSCREEN_TEST_BROKER's.

    Every service on it gets topics and consumer groups of its own (`tests.service.isolated`).
    """
    named = os.environ.get("CALLSCREEN_TEST_BROKER")
    if named:
        yield named
        return
    broker = LocalKafka(tmp_path_factory.mktemp("kafka"), jvm_options=QUICK_JVM)
    broker.start()
    yield broker.url
    broker.stop()


@pytest.fixture(scope="session")
def service(kafka: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    """`callscreen run` on the session's Kafka: most tests share it, each with accounts of its own."""
    data_dir: Path = tmp_path_factory.mktemp("service") / "data"
    with running_service(data_dir, kafka) as running:
        yield running


@pytest.fixture(scope="session")
def log_service(kafka: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    """A service of its own for the tests that restart, kill or rebuild its parts, and compare its answers
    before and after (so without the wall clock's sweep)."""
    # A checkpoint a second, so a test that kills a worker after one waits a second, not ten; the worker's
    # metrics say what its recovery read.
    env = {**NO_SWEEP, "CALLSCREEN_TABLE_CHECKPOINT_S": "1", "CALLSCREEN_METRICS_PORT": str(free_port_block(2))}
    with running_service(tmp_path_factory.mktemp("log") / "data", kafka, env=env) as running:
        yield running


@pytest.fixture(scope="session")
def webhook_ca(tmp_path_factory: pytest.TempPathFactory) -> tuple[trustme.CA, Path]:
    """A certificate authority the webhook receivers' certificates come from, and its file for services."""
    authority = trustme.CA()
    path = tmp_path_factory.mktemp("webhook-ca") / "ca.pem"
    authority.cert_pem.write_to_path(str(path))
    return authority, path


@pytest.fixture
async def receiver(webhook_ca: tuple[trustme.CA, Path]) -> AsyncIterator[Receiver]:
    """A real HTTPS receiver on loopback (tests/receiver.py), trusted through `webhook_ca`."""
    async with serving(webhook_ca[0]) as hook:
        yield hook


@pytest.fixture(scope="module")
async def module_receiver(webhook_ca: tuple[trustme.CA, Path]) -> AsyncIterator[Receiver]:
    """`receiver`, one for the whole module: for a module whose service is its own and lives as long."""
    async with serving(webhook_ca[0]) as hook:
        yield hook


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


@pytest.fixture(scope="module")
async def carrier(webhook_ca: tuple[trustme.CA, Path]) -> AsyncIterator[Carrier]:
    """The carrier's REST API on loopback (tests/gate_stand_ins.py); tests tell their requests apart by CallSid."""
    stand_in = Carrier()
    async with https_site(webhook_ca[0], stand_in.handle) as url:
        stand_in.url = url
        yield stand_in


@pytest.fixture(scope="module")
async def platform(webhook_ca: tuple[trustme.CA, Path]) -> AsyncIterator[Platform]:
    """A platform's voice URL on loopback, where the gate forwards calls."""
    stand_in = Platform()
    async with https_site(webhook_ca[0], stand_in.handle) as url:
        stand_in.url = url
        yield stand_in


@pytest.fixture(scope="module")
def gate_service(
    kafka: str, tmp_path_factory: pytest.TempPathFactory, webhook_ca: tuple[trustme.CA, Path], carrier: Carrier
) -> Iterator[RunningService]:
    """A service with carrier credentials of its own (a hang-up that used them would be seen) that trusts
    the receivers' CA, for the gate's tests and the signed hang-ups'. One a module, as long as the module:
    kept for the whole session, its idle roles took the two cores' time from every later file."""
    env = {
        **receiver_env(webhook_ca[1]),
        "CALLSCREEN_TWILIO_API_BASE": carrier.url,
        "CALLSCREEN_TWILIO_ACCOUNT_SID": CARRIER_ACCOUNT_SID,
        "CALLSCREEN_TWILIO_AUTH_TOKEN": CARRIER_AUTH_TOKEN,
    }
    with running_service(tmp_path_factory.mktemp("gate") / "data", kafka, env=env) as running:
        yield running
