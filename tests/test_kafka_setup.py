"""Starting on Kafka: SASL credentials, topics the service cannot run on, no Java on the machine, and an
event loop it does not know."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from aiokafka import TopicPartition
from aiokafka.admin import NewTopic

from callscreen.localkafka import LocalKafka
from infra.kafka import ensure_topics, make_admin, make_consumer, until_coordinator
from infra.ports import free_port, free_ports
from infra.settings import Settings
from tests.service import QUICK_JVM, create_account, isolated, start_service

pytestmark = pytest.mark.slow

USER, PASSWORD = "callscreen", "scram-secret-1"


def run_until_exit(env: dict[str, str], *args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
    """`callscreen run` that is expected to refuse to start: its exit code and what it said."""
    command = [sys.executable, "-m", "callscreen.cli", "run", "--port", str(free_port()), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env={**os.environ, **env})


@pytest.fixture(scope="module")
def sasl_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A local Kafka whose client listener takes SASL (SCRAM-SHA-256/512 and PLAIN) and nothing else."""
    broker = LocalKafka(tmp_path_factory.mktemp("sasl"), sasl_users={USER: PASSWORD}, jvm_options=QUICK_JVM)
    broker.start()
    yield broker.url
    broker.stop()


def sasl_env(mechanism: str, password: str = PASSWORD) -> dict[str, str]:
    return {
        "CALLSCREEN_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "CALLSCREEN_KAFKA_SASL_MECHANISM": mechanism,
        "CALLSCREEN_KAFKA_SASL_USERNAME": USER,
        "CALLSCREEN_KAFKA_SASL_PASSWORD": password,
    }


async def test_every_role_and_admin_command_speaks_scram(
    sasl_kafka: str, tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    service = start_service(tmp_path / "data", sasl_kafka, env=sasl_env("SCRAM-SHA-512"))
    try:
        # The admin path (create_account) and the edge, the worker and its answer all went through SASL.
        account = await create_account(service.settings, http, service.base_url)
        start = {"type": "call.started", "call_id": "sasl-1", "to": "+14155552671", "from": "+12125550123"}
        async with http.post(f"{service.base_url}/v1/events", json=start, headers=account.headers) as r:
            assert r.status == 200
            assert (await r.json())["action"] == "allow"
        async with http.get(f"{service.base_url}/v1/calls/sasl-1", headers=account.headers) as r:
            assert r.status == 200
    finally:
        assert service.stop() == 0


async def test_wrong_credentials_stop_the_start_with_a_clear_error(sasl_kafka: str) -> None:
    started = time.monotonic()
    done = await asyncio.to_thread(
        run_until_exit, {**isolated(), **sasl_env("SCRAM-SHA-256", "wrong")}, "--broker", sasl_kafka
    )
    assert done.returncode == 2
    assert "authentication" in done.stderr.lower() and "CALLSCREEN_KAFKA_SASL" in done.stderr
    assert "Traceback" not in done.stderr
    assert time.monotonic() - started < 60


async def topic(kafka: str, name: str, partitions: int, configs: dict[str, str]) -> None:
    admin = make_admin(Settings(broker=kafka))
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1, topic_configs=configs)])
    finally:
        await admin.close()


async def test_a_source_topic_that_would_expire_is_refused(kafka: str) -> None:
    env = isolated()
    name = f"{env['CALLSCREEN_TOPIC_PREFIX']}.events"
    await topic(kafka, name, 4, {"retention.ms": "3600000"})
    done = await asyncio.to_thread(run_until_exit, env, "--broker", kafka)
    assert done.returncode == 2
    assert f"topic {name} would expire records (retention.ms=3600000" in done.stderr
    assert "retention.ms=-1" in done.stderr


async def test_a_source_topic_with_other_partitions_is_refused(kafka: str) -> None:
    env = isolated()
    name = f"{env['CALLSCREEN_TOPIC_PREFIX']}.decisions"
    await topic(kafka, name, 3, {"retention.ms": "-1"})
    done = await asyncio.to_thread(run_until_exit, env, "--broker", kafka)
    assert done.returncode == 2
    assert f"topic {name} has 3 partitions, not 4" in done.stderr
    assert "CALLSCREEN_PARTITIONS" in done.stderr


async def test_a_group_consumer_that_waits_for_its_coordinator_logs_no_refusal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A broker of its own: a new broker refuses a group's first coordinator lookups (it makes its group
    # offsets topic then), and the consumer logs each refusal it meets as an error.
    broker = LocalKafka(tmp_path / "kafka", jvm_options=QUICK_JVM)
    await asyncio.to_thread(broker.start)
    settings = Settings(broker=broker.url)
    group = settings.topic("alerting")
    consumer = make_consumer(settings, group_id=group)
    try:
        await ensure_topics(settings)
        await until_coordinator(settings, group)
        with caplog.at_level(logging.WARNING, logger="aiokafka"):
            await consumer.start()
            consumer.subscribe([settings.topic("alerts")])
            deadline = time.monotonic() + 15
            while not consumer.assignment() and time.monotonic() < deadline:
                await consumer.getmany(timeout_ms=200)
        assert consumer.assignment() == {TopicPartition(settings.topic("alerts"), p) for p in range(4)}
        assert [r.getMessage() for r in caplog.records if r.name.startswith("aiokafka")] == []
    finally:
        await consumer.stop()
        await asyncio.to_thread(broker.stop)


async def test_a_broker_whose_port_is_taken_before_it_binds_starts_again_on_fresh_ports(tmp_path: Path) -> None:
    # A start reuses the ports of the last one when nothing listens on them. Here the client port is held
    # by a socket that is bound and does not listen, as an outgoing connection holds its port: the first
    # JVM cannot bind it and exits, and the start picks new ports.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", free_port()))
        taken = held.getsockname()[1]
        controller, internal = free_ports(2)
        (tmp_path / "kafka").mkdir()
        ports = {"client": taken, "controller": controller, "internal": internal}
        (tmp_path / "kafka" / "ports.json").write_text(json.dumps(ports))
        broker = LocalKafka(tmp_path, jvm_options=QUICK_JVM)
        try:
            await asyncio.to_thread(broker.start)
            assert broker.ports is not None and broker.ports.client != taken
            log = broker.log_file.read_text()
            assert f"failed to bind to 127.0.0.1:{taken}: Address already in use" in log
            assert log.count("Exiting Kafka due to fatal exception during startup") == 1
            admin = make_admin(Settings(broker=broker.url))
            await admin.start()
            try:
                assert len((await admin.describe_cluster())["brokers"]) == 1
            finally:
                await admin.close()
        finally:
            await asyncio.to_thread(broker.stop)


async def test_without_java_run_names_both_ways_out(tmp_path: Path) -> None:
    no_java = {"PATH": str(Path(sys.executable).parent), "JAVA_HOME": ""}
    done = await asyncio.to_thread(run_until_exit, no_java, "--data-dir", str(tmp_path / "data"))
    assert done.returncode == 2
    assert "needs Java 17+" in done.stderr
    assert "--broker memory" in done.stderr and "install Java" in done.stderr


async def test_an_unknown_event_loop_is_refused_before_anything_starts(tmp_path: Path) -> None:
    done = await asyncio.to_thread(
        run_until_exit, {"CALLSCREEN_EVENT_LOOP": "trio"}, "--data-dir", str(tmp_path / "data")
    )
    assert done.returncode == 2
    assert done.stderr == "callscreen: event_loop must be one of uvloop, asyncio, not 'trio'\n"
    assert not (tmp_path / "data").exists()


async def test_an_edge_port_in_use_is_refused_before_the_broker_starts(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", free_port()))
        taken.listen()
        port = taken.getsockname()[1]
        done = await asyncio.to_thread(run_until_exit, {}, "--port", str(port), "--data-dir", str(tmp_path / "data"))
    assert done.returncode == 2
    assert done.stderr.endswith(f"callscreen: cannot listen on 127.0.0.1:{port}: Address already in use\n")
    assert not (tmp_path / "data" / "kafka").exists()
