"""Starting the real service for tests: `callscreen run` as a child process, and its accounts."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from callscreen.admin import Admin
from callscreen.broker import BROKER_FILE
from infra.control import SOURCE_TOPICS, source_ends
from infra.kafka import read_all
from infra.ports import free_port
from infra.settings import Settings, load_settings

READY_PREFIX = "callscreen ready on "
# The JVM options of every Kafka the suite starts: only the quick compiler. Its brokers live a minute or
# so, and the optimizing compiler's threads took a fifth of a traffic test's CPU (tests/test_two_workers.py:
# 45.0 s of user+sys with it, 34.8 s without). tests/conftest.py hands it to every `callscreen run`.
QUICK_JVM = "-XX:TieredStopAtLevel=1"
START_TIMEOUT_S = 120.0


@dataclass
class RunningService:
    """A `callscreen run` process: its base URL, its settings and its output."""

    process: subprocess.Popen[str]
    base_url: str
    settings: Settings
    data_dir: Path
    stdout_lines: list[str] = field(default_factory=list)
    # What locates it for another process (an admin command, a second edge): broker, topic prefix, app id.
    env: dict[str, str] = field(default_factory=dict)

    def stop(self, timeout_s: float = 15.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout_s)


def role_pids(service: RunningService, role: str) -> list[int]:
    """The processes of one role (`worker`, `alerting`) that the service's `callscreen run` started."""
    pattern = f"callscreen.cli run --role {role} --data-dir {service.data_dir}"
    return [int(pid) for pid in subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()]


def isolated(env: dict[str, str] | None = None) -> dict[str, str]:
    """Topics and consumer groups of their own on a shared broker: a fresh prefix unless `env` names one."""
    env = dict(env or {})
    if "CALLSCREEN_TOPIC_PREFIX" not in env:
        prefix = f"t{uuid.uuid4().hex[:10]}"
        env.update(CALLSCREEN_TOPIC_PREFIX=prefix, CALLSCREEN_APP_ID=f"{prefix}-worker")
    return env


def start_service(data_dir: Path, broker: str = "", *extra: str, env: dict[str, str] | None = None) -> RunningService:
    """Start `callscreen run` and return once it printed its ready line.

    With a `broker` URL the service gets topics of its own on it (`isolated`); with none, `run` starts
    its own local Kafka under `data_dir`, as it does for a user.
    """
    port = free_port()
    command = [sys.executable, "-m", "callscreen.cli", "run", "--port", str(port), "--data-dir", str(data_dir), *extra]
    locator: dict[str, str] = {}
    if broker and broker != "memory":
        env = isolated(env)
        locator = {k: env[k] for k in ("CALLSCREEN_TOPIC_PREFIX", "CALLSCREEN_APP_ID")} | {"CALLSCREEN_BROKER": broker}
    if broker:
        command += ["--broker", broker]
    # Every struct a worker keeps decoded is checked against its row decoded again (processors/state/row_cache.py).
    env = {**os.environ, "CALLSCREEN_ROW_CACHE_CHECK": "1", **(env or {})}
    with open(data_dir.parent / f"{data_dir.name}.log", "a") as log:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
    lines: list[str] = []
    deadline = time.monotonic() + START_TIMEOUT_S
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"callscreen run exited early ({process.wait()}); see {data_dir}.log")
        lines.append(line)
        if line.startswith(READY_PREFIX):
            break
    else:
        process.kill()
        raise TimeoutError("callscreen run did not get ready")
    base_url = lines[-1][len(READY_PREFIX) :].strip()
    broker_url = json.loads((data_dir / BROKER_FILE).read_text())["broker"] if broker in ("", "memory") else broker
    settings = load_settings(env).with_overrides(broker=broker_url, data_dir=str(data_dir))
    return RunningService(process, base_url, settings, data_dir, lines, locator)


@contextmanager
def running_service(
    data_dir: Path, broker: str = "", *extra: str, env: dict[str, str] | None = None
) -> Iterator[RunningService]:
    """`start_service`, stopped on the way out: a fixture's whole life."""
    service = start_service(data_dir, broker, *extra, env=env)
    try:
        yield service
    finally:
        service.stop()


@dataclass
class AccountKeys:
    account_id: str
    key: str
    key_id: str
    ingest_token: str
    signing_secret: str
    plan: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


async def create_account(
    settings: Settings, http: aiohttp.ClientSession, base_url: str, plan: str = "guard", account_id: str = ""
) -> AccountKeys:
    """A fresh account, returned once the edge accepts its key (the contract allows one second)."""
    async with Admin(settings) as admin:
        created = await admin.account_create(plan, "test", account_id)
    account = AccountKeys(
        **{k: created[k] for k in ("account_id", "key", "key_id", "ingest_token", "signing_secret", "plan")}
    )
    await wait_for_status(http, "GET", f"{base_url}/v1/account", 200, headers=account.headers)
    return account


async def wait_for_status(
    http: aiohttp.ClientSession, method: str, url: str, status: int, timeout_s: float = 1.0, **kwargs: Any
) -> float:
    """Seconds until `url` answers `status`; fails past the timeout the contract allows."""
    started = time.monotonic()
    last = None
    while time.monotonic() - started < timeout_s:
        async with http.request(method, url, **kwargs) as response:
            last = response.status
            if last == status:
                return time.monotonic() - started
        await asyncio.sleep(0.02)
    raise AssertionError(f"{method} {url} still answered {last}, not {status}, after {timeout_s}s")


LIVE_BEAT_S = 3.0


@dataclass
class Progress:
    """How far each role has read each source partition, from their latest heartbeats."""

    folded: dict[tuple[str, str], int]
    mirrored: dict[str, int]
    delivered: dict[str, int]

    def reached(self, settings: Settings, topic: str, part: str, end: int) -> bool:
        if end == 0:
            return True
        if topic in ("decisions", "deliveries") and self.mirrored.get(f"{settings.topic(topic)}|{part}", 0) < end:
            return False
        if topic == "alerts" and self.delivered.get(part, 0) < end:
            return False
        return topic == "deliveries" or self.folded.get((topic, part), 0) >= end


async def settled(settings: Settings, timeout_s: float = 30.0) -> None:
    """Returns once every record in the source topics has been folded by the workers, their feature
    views and the alerting role, and folding them appended nothing further (a fixed point)."""
    topics = SOURCE_TOPICS
    deadline = time.monotonic() + timeout_s
    previous: dict[str, dict[str, int]] | None = None
    behind: list[tuple[str, str, int]] = []
    while time.monotonic() < deadline:
        ends = await source_ends(settings)
        beats: dict[str, dict[str, Any]] = {}
        for record in await read_all(settings, settings.topic("status")):
            beat = orjson.loads(record.value)
            if time.time() - beat.get("sent_at", 0) < LIVE_BEAT_S:
                beats[str(beat.get("worker") or beat.get("instance"))] = beat
        folded: dict[tuple[str, str], int] = {}
        mirrored: dict[str, int] = {}
        delivered: dict[str, int] = {}
        for beat in beats.values():
            for topic, parts in beat.get("replay", {}).items():
                for part, (done, _) in parts.items():
                    folded[(topic, part)] = max(folded.get((topic, part), 0), done)
            for key, offset in beat.get("mirror", {}).items():
                mirrored[key] = min(mirrored.get(key, offset), offset)
            if beat.get("kind") == "alerting.heartbeat":
                delivered.update(beat["positions"])

        progress = Progress(folded, mirrored, delivered)
        behind = [(t, p, e) for t in topics for p, e in ends[t].items() if not progress.reached(settings, t, p, e)]
        if not behind:
            if ends == previous:
                return
            previous = ends
        await asyncio.sleep(0.2)
    raise TimeoutError(f"the service did not settle; behind (topic, partition, end): {behind}")


async def rebuild(service: RunningService) -> subprocess.CompletedProcess[bytes]:
    """`callscreen rebuild` against the running service's broker and topics, as an operator runs it."""
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "callscreen.cli", "rebuild", "--data-dir", str(service.data_dir)],
        capture_output=True,
        timeout=300,
        env={**os.environ, **service.env},
    )
