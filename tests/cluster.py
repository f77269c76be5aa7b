"""A three-node Apache Kafka (KRaft) cluster on loopback for the tests: three JVMs, each broker and
controller at once (`process.roles=broker,controller`), one static quorum of the three.

Each node is the single node of `callscreen.localkafka` with a node id, the quorum and replication factor
3 (`server_properties`): the internal topics at RF 3 with min.insync.replicas 2, the same defaults for
every topic. Every node is formatted with one cluster id. A node can be SIGKILLed and started again on its
own log (`KafkaCluster.kill`, `KafkaCluster.restart`); `running_cluster` stops every JVM it started, even
when the test failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient

from callscreen.localkafka import (
    BrokerUnavailable,
    Ports,
    broker_command,
    die_with_this_process,
    fetch,
    java_command,
    log4j_properties,
    server_properties,
)
from infra.ports import free_ports, port_open
from tests.service import QUICK_JVM

SIZE = 3
HEAP_MB = 384
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0


@dataclass
class Node:
    """One JVM of the cluster: its id, ports and directory (configuration, log, console output)."""

    node_id: int
    dir: Path
    ports: Ports
    process: subprocess.Popen[bytes] | None = None

    @property
    def config(self) -> Path:
        return self.dir / "server.properties"

    @property
    def log_file(self) -> Path:
        return self.dir / "broker.log"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


class KafkaCluster:
    """`size` combined nodes on `host`; `url` is the `kafka://h:p1,h:p2,h:p3` the service takes."""

    def __init__(self, base: Path, size: int = SIZE, host: str = "127.0.0.1", heap_mb: int = HEAP_MB) -> None:
        self.base = base.resolve()
        self.host = host
        self.heap_mb = heap_mb
        self.java = java_command()
        self.classpath = str(fetch() / "*")
        self.jvm_args = shlex.split(QUICK_JVM)
        ports = free_ports(3 * size, host)
        self.nodes = [Node(i + 1, self.base / f"node{i + 1}", Ports(*ports[3 * i : 3 * i + 3])) for i in range(size)]

    @property
    def tool(self) -> list[str]:
        return [self.java, *self.jvm_args, "-cp", self.classpath, "kafka.tools.StorageTool"]

    @property
    def url(self) -> str:
        return "kafka://" + self.bootstrap

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.host}:{n.ports.client}" for n in self.nodes)

    def node(self, node_id: int) -> Node:
        return next(n for n in self.nodes if n.node_id == node_id)

    def start(self) -> None:
        """Formats every node with one cluster id, starts the three JVMs and waits until each names all."""
        made = subprocess.run(
            [*self.tool, "random-uuid"],
            check=True,
            capture_output=True,
            text=True,
        )
        cluster_id = made.stdout.strip()
        voters = ",".join(f"{n.node_id}@{self.host}:{n.ports.controller}" for n in self.nodes)
        for node in self.nodes:
            node.dir.mkdir(parents=True, exist_ok=True)
            properties = server_properties(
                node.dir / "log", self.host, node.ports, None, node_id=node.node_id, voters=voters, replication=SIZE
            )
            node.config.write_text(properties)
            (node.dir / "log4j2.properties").write_text(log4j_properties(node.log_file))
        # The three formats at once: each is a JVM start of its own.
        formats = [
            subprocess.Popen(
                [*self.tool, "format", "--ignore-formatted", "-t", cluster_id, "-c", str(node.config)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for node in self.nodes
        ]
        for node, format_run in zip(self.nodes, formats, strict=True):
            _, error = format_run.communicate()
            if format_run.returncode != 0:
                raise BrokerUnavailable(f"formatting {node.dir} failed: {error.decode().strip()}")
        for node in self.nodes:
            self.spawn(node)
        self.wait_ready()

    def spawn(self, node: Node) -> None:
        """Starts `node`'s JVM on its formatted log (the first start and every restart)."""
        with open(node.dir / "console.log", "ab") as console:
            node.process = subprocess.Popen(
                broker_command(
                    self.java, self.classpath, self.heap_mb, node.dir / "log4j2.properties", node.config, self.jvm_args
                ),
                stdout=console,
                stderr=console,
                start_new_session=True,
                # Called from the main thread only: the death signal follows the thread that started it.
                preexec_fn=die_with_this_process(signal.SIGKILL),
            )

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until every node's client port answers a metadata request naming all the nodes."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            dead = [n.node_id for n in self.nodes if not n.alive()]
            if dead:
                raise BrokerUnavailable(f"Kafka node(s) {dead} exited at start-up; see {self.base}/node*/broker.log")
            if all(port_open(self.host, n.ports.client) for n in self.nodes) and asyncio.run(self._all_named()):
                return
            time.sleep(0.3)
        raise BrokerUnavailable(f"the Kafka cluster did not get ready within {timeout_s:.0f}s; see {self.base}")

    async def _all_named(self) -> bool:
        for node in self.nodes:
            admin = AIOKafkaAdminClient(bootstrap_servers=f"{self.host}:{node.ports.client}", request_timeout_ms=3000)
            try:
                await admin.start()
                if len((await admin.describe_cluster()).get("brokers", [])) < len(self.nodes):
                    return False
            except Exception:
                return False
            finally:
                with contextlib.suppress(Exception):
                    await admin.close()
        return True

    def kill(self, node_id: int) -> None:
        """SIGKILL: no controlled shutdown, no flush, leadership moves only once the controller fences it."""
        node = self.node(node_id)
        assert node.process is not None and node.alive(), f"node {node_id} is not running"
        node.process.send_signal(signal.SIGKILL)
        node.process.wait()

    def restart(self, node_id: int) -> None:
        node = self.node(node_id)
        assert not node.alive(), f"node {node_id} is still running"
        self.spawn(node)

    def stop(self) -> None:
        """Every node SIGTERMed at once (a controlled shutdown each), SIGKILLed past the timeout."""
        running = [n.process for n in self.nodes if n.process is not None and n.process.poll() is None]
        for process in running:
            process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for process in running:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    async def partitions(self) -> dict[tuple[str, int], dict[str, Any]]:
        """Every partition of every topic (the internal ones too): its leader, replicas and ISR."""
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=5000)
        try:
            await admin.start()
            found = {}
            for topic in await admin.describe_topics():
                for part in topic["partitions"]:
                    found[(topic["topic"], part["partition"])] = {
                        "leader": part["leader"],
                        "replicas": sorted(part["replicas"]),
                        "isr": sorted(part["isr"]),
                    }
            return found
        finally:
            with contextlib.suppress(Exception):
                await admin.close()

    async def until_fully_replicated(self, timeout_s: float = 90.0) -> float:
        """Seconds until every partition's ISR holds every node (so a restarted node rejoined them all)."""
        started = time.monotonic()
        everyone = [n.node_id for n in self.nodes]
        short: list[tuple[str, int, list[int]]] = []
        error = ""
        while time.monotonic() - started < timeout_s:
            try:
                found = await self.partitions()
                short = [(t, p, s["isr"]) for (t, p), s in found.items() if s["isr"] != everyone]
                error = ""
                if found and not short:
                    return time.monotonic() - started
            except Exception as exc:  # a metadata request to a node that is going away
                error = repr(exc)
            await asyncio.sleep(0.25)
        raise AssertionError(f"partitions short of a full ISR after {timeout_s}s: {short[:10]} {error}")


@contextmanager
def running_cluster(base: Path, size: int = SIZE) -> Iterator[KafkaCluster]:
    """A started cluster, every JVM of it stopped on the way out (killed if a stop hangs)."""
    cluster = KafkaCluster(base, size)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
