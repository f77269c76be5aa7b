"""The local Apache Kafka `callscreen run` starts when no broker is named (README.md, "The broker").

One JVM is broker and KRaft controller at once, with its log on disk under `<data-dir>/kafka`, so
every account, key, call and alert survives a stop. The jars come from Maven Central through the
pinned `callscreen/kafka/pom.xml`, package data so an installed wheel has it too, fetched once into a
cache outside the work tree (`fetch`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from aiokafka.admin import AIOKafkaAdminClient

from infra.kafka import auth
from infra.ports import free_ports, port_open
from infra.settings import Settings

POM = Path(__file__).resolve().parent / "kafka" / "pom.xml"
MIN_JAVA = 17
START_TIMEOUT_S = 90.0
START_ATTEMPTS = 3
STOP_TIMEOUT_S = 30.0
PR_SET_PDEATHSIG = 1


class BrokerUnavailable(RuntimeError):
    """The local broker cannot be started here; the message says what to do instead."""


def kafka_version(pom: Path = POM) -> str:
    """The pinned Kafka version: the `kafka.version` property of the pom, the one place it is written."""
    if not pom.exists():
        raise BrokerUnavailable(
            f"the local Kafka is defined by {pom}, which this installation lacks; reinstall callscreen, "
            "or name a broker with --broker kafka://host:port"
        )
    namespace = {"m": "http://maven.apache.org/POM/4.0.0"}
    found = ElementTree.parse(pom).getroot().find("m:properties/m:kafka.version", namespace)
    if found is None or not found.text:
        raise BrokerUnavailable(f"{pom} names no kafka.version")
    return found.text.strip()


def default_home() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "callscreen" / f"kafka-{kafka_version()}"


def lib_dir(home: str = "") -> Path:
    return (Path(home).expanduser() if home else default_home()) / "lib"


def fetched(home: str = "") -> bool:
    return (lib_dir(home) / ".complete").exists()


def fetch(home: str = "", out: TextIO = sys.stderr) -> Path:
    """Copy the broker's jars from Maven Central into the cache once; Maven verifies every checksum."""
    lib = lib_dir(home)
    if fetched(home):
        return lib
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerUnavailable(
            "fetching the local Kafka needs Apache Maven (mvn) on PATH; install it, "
            "or name a broker with --broker kafka://host:port"
        )
    print(f"fetching Apache Kafka {kafka_version()} from Maven Central into {lib.parent} (once)", file=out)
    lib.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="lib-", dir=lib.parent))
    command = [
        mvn,
        "-B",
        "-q",
        "--strict-checksums",
        "-Dstyle.color=never",
        "-f",
        str(POM),
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={staging}",
    ]
    try:
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        (staging / ".complete").write_text(kafka_version() + "\n")
        shutil.rmtree(lib, ignore_errors=True)
        staging.rename(lib)
    except subprocess.CalledProcessError as exc:
        raise BrokerUnavailable(f"mvn could not fetch the Kafka jars (exit {exc.returncode})") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return lib


def java_command() -> str:
    """The `java` to run the broker with (JAVA_HOME first, then PATH), checked to be 17 or newer."""
    home = os.environ.get("JAVA_HOME")
    candidate = str(Path(home) / "bin" / "java") if home and (Path(home) / "bin" / "java").exists() else None
    java = candidate or shutil.which("java")
    way_out = (
        f"install Java {MIN_JAVA} or newer (Debian: apt-get install openjdk-17-jre-headless), "
        "or run with --broker memory for the in-memory development broker (nothing it holds survives a stop)"
    )
    if java is None:
        raise BrokerUnavailable(f"the local Apache Kafka needs Java {MIN_JAVA}+ and none is on PATH: {way_out}")
    probe = subprocess.run([java, "-version"], capture_output=True, text=True)
    major = java_major(probe.stderr + probe.stdout)
    if major is None or major < MIN_JAVA:
        raise BrokerUnavailable(f"the local Apache Kafka needs Java {MIN_JAVA}+, found {java} ({major}): {way_out}")
    return java


def java_major(version_text: str) -> int | None:
    """17 from `openjdk version "17.0.15"`, 8 from `"1.8.0_392"`."""
    found = re.search(r'version "(\d+)(?:\.(\d+))?', version_text)
    if found is None:
        return None
    major = int(found.group(1))
    return int(found.group(2) or 0) if major == 1 else major


@dataclass(frozen=True)
class Ports:
    client: int
    controller: int
    internal: int

    @staticmethod
    def pick(host: str, previous: dict[str, int] | None) -> Ports:
        """The ports of the last start when they are free again (stable for operators), else new ones."""
        if previous and not any(port_open(host, p) for p in previous.values()):
            return Ports(previous["client"], previous["controller"], previous["internal"])
        return Ports(*free_ports(3, host))


def server_properties(
    log_dir: Path,
    host: str,
    ports: Ports,
    sasl_users: dict[str, str] | None,
    *,
    node_id: int = 1,
    voters: str = "",
    replication: int = 1,
) -> str:
    """One node, broker and controller; clients on their own listener, SASL/SCRAM on it when asked.

    By default the single node `callscreen run` starts. A node of a cluster (tests/cluster.py) names its
    `node_id`, the static quorum (`voters`, `id@host:port,...`) and the `replication` of the internal
    topics, whose min.insync.replicas is then one less (the default for every topic too)."""
    client = "CLIENT"
    min_isr = max(1, replication - 1)
    lines = [
        "process.roles=broker,controller",
        f"node.id={node_id}",
        f"controller.quorum.voters={voters or f'{node_id}@{host}:{ports.controller}'}",
        f"listeners={client}://{host}:{ports.client},INTERNAL://{host}:{ports.internal},"
        f"CONTROLLER://{host}:{ports.controller}",
        f"advertised.listeners={client}://{host}:{ports.client},INTERNAL://{host}:{ports.internal}",
        "inter.broker.listener.name=INTERNAL",
        "controller.listener.names=CONTROLLER",
        f"listener.security.protocol.map=CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,"
        f"{client}:{'SASL_PLAINTEXT' if sasl_users else 'PLAINTEXT'}",
        f"log.dirs={log_dir}",
        "auto.create.topics.enable=false",
        f"offsets.topic.replication.factor={replication}",
        "offsets.topic.num.partitions=1",
        f"transaction.state.log.replication.factor={replication}",
        f"transaction.state.log.min.isr={min_isr}",
        "transaction.state.log.num.partitions=1",
        f"share.coordinator.state.topic.replication.factor={replication}",
        f"share.coordinator.state.topic.min.isr={min_isr}",
        "group.initial.rebalance.delay.ms=0",
        "num.network.threads=2",
        "num.io.threads=2",
        "num.partitions=1",
        # After a crash the new start cannot register until the dead one's session has timed out (9 s by
        # default). The one node heartbeats to itself over loopback, so a short session costs nothing.
        "broker.session.timeout.ms=4000",
        "broker.heartbeat.interval.ms=500",
    ]
    if replication > 1:
        lines += [f"default.replication.factor={replication}", f"min.insync.replicas={min_isr}"]
    if sasl_users:
        plain_users = " ".join(f'user_{name}="{password}"' for name, password in sasl_users.items())
        lines += [
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            f"listener.name.{client.lower()}.plain.sasl.jaas.config="
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};",
            f"listener.name.{client.lower()}.scram-sha-256.sasl.jaas.config="
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            f"listener.name.{client.lower()}.scram-sha-512.sasl.jaas.config="
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        ]
    return "\n".join(lines) + "\n"


def log4j_properties(log_file: Path) -> str:
    """Warnings and the started line, to a file beside the log: the console belongs to `callscreen run`."""
    return "\n".join(
        [
            "status = error",
            "appender.file.type = File",
            "appender.file.name = FILE",
            f"appender.file.fileName = {log_file}",
            "appender.file.layout.type = PatternLayout",
            "appender.file.layout.pattern = [%d] %p %m (%c)%n",
            "rootLogger.level = WARN",
            "rootLogger.appenderRef.file.ref = FILE",
            "logger.started.name = kafka.server.KafkaRaftServer",
            "logger.started.level = INFO",
            "",
        ]
    )


def _die_with_parent(parent: int, how: int) -> None:
    """In the child before exec: signal `how` when `callscreen run` dies, even by SIGKILL (no orphan)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, how)
    if os.getppid() != parent:
        os._exit(1)


def die_with_this_process(how: int = signal.SIGTERM) -> Callable[[], None]:
    """A `preexec_fn` for children that must not outlive this process."""
    parent = os.getpid()
    return lambda: _die_with_parent(parent, how)


def broker_command(
    java: str, classpath: str, heap_mb: int, logging_config: Path, config: Path, jvm_args: Sequence[str] = ()
) -> list[str]:
    """The JVM command of one Kafka node (broker and KRaft controller) on its `server.properties`."""
    return [
        java,
        *jvm_args,
        f"-Xms{min(256, heap_mb)}m",
        f"-Xmx{heap_mb}m",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={logging_config}",
        "-cp",
        classpath,
        "kafka.Kafka",
        str(config),
    ]


class LocalKafka:
    """Formats KRaft storage once, starts the broker on loopback, waits until it takes requests."""

    durable = True

    def __init__(
        self,
        data_dir: Path,
        host: str = "127.0.0.1",
        heap_mb: int = 512,
        home: str = "",
        sasl_users: dict[str, str] | None = None,
        jvm_options: str = "",
    ) -> None:
        self.dir = data_dir.resolve() / "kafka"
        self.jvm_args = shlex.split(jvm_options)
        self.host = host
        self.heap_mb = heap_mb
        self.home = home
        self.sasl_users = sasl_users
        self.process: subprocess.Popen[bytes] | None = None
        self.ports: Ports | None = None

    @property
    def url(self) -> str:
        assert self.ports is not None
        return f"kafka://{self.host}:{self.ports.client}"

    @property
    def log_file(self) -> Path:
        return self.dir / "broker.log"

    def cluster_id(self, java: str, classpath: str) -> str:
        """Made once and kept beside the log: formatting an existing log with another id fails."""
        path = self.dir / "cluster-id"
        if not path.exists():
            made = subprocess.run(
                [java, *self.jvm_args, "-cp", classpath, "kafka.tools.StorageTool", "random-uuid"],
                check=True,
                capture_output=True,
                text=True,
            )
            path.write_text(made.stdout.strip() + "\n")
        return path.read_text().strip()

    def start(self) -> None:
        """Starts the broker. A start of a broker that ran before in this process (`callscreen run`
        restarting one that died) keeps its ports: its roles and edge were given them."""
        java = java_command()
        classpath = str(fetch(self.home) / "*")
        if self.ports is not None:
            self.launch(java, classpath)
            self.wait_ready()
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        ports_file = self.dir / "ports.json"
        previous = json.loads(ports_file.read_text()) if ports_file.exists() else None
        for attempt in range(1, START_ATTEMPTS + 1):
            self.ports = Ports.pick(self.host, previous)
            ports_file.write_text(json.dumps(self.ports.__dict__))
            log_start = self.log_file.stat().st_size if self.log_file.exists() else 0
            self.launch(java, classpath)
            try:
                self.wait_ready()
                return
            except BrokerUnavailable:
                # A port free when picked can be bound by another process before the JVM binds it.
                if attempt == START_ATTEMPTS or not self.lost_a_port(log_start):
                    raise
            previous = None

    def launch(self, java: str, classpath: str) -> None:
        """Writes the configuration for `self.ports`, formats the log once and starts the JVM."""
        assert self.ports is not None
        config = self.dir / "server.properties"
        config.write_text(server_properties(self.dir / "log", self.host, self.ports, self.sasl_users))
        logging_config = self.dir / "log4j2.properties"
        logging_config.write_text(log4j_properties(self.log_file))
        format_command = [
            java,
            *self.jvm_args,
            "-cp",
            classpath,
            "kafka.tools.StorageTool",
            "format",
            "--ignore-formatted",
            "-t",
            self.cluster_id(java, classpath),
            "-c",
            str(config),
        ]
        for name, password in (self.sasl_users or {}).items():
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                format_command += ["--add-scram", f"{mechanism}=[name={name},password={password}]"]
        formatted = subprocess.run(format_command, capture_output=True, text=True)
        if formatted.returncode != 0:
            raise BrokerUnavailable(f"formatting the Kafka log under {self.dir} failed: {formatted.stderr.strip()}")
        with open(self.dir / "console.log", "ab") as console:
            self.process = subprocess.Popen(
                broker_command(java, classpath, self.heap_mb, logging_config, config, self.jvm_args),
                stdout=console,
                stderr=console,
                # Its own session: Ctrl-C reaches `callscreen run`, which stops the roles first, the broker last.
                start_new_session=True,
                preexec_fn=die_with_this_process(),
            )

    def lost_a_port(self, log_start: int) -> bool:
        """Whether the start that logged from `log_start` on failed to bind one of its ports."""
        with open(self.log_file, "rb") as log:
            log.seek(log_start)
            return b"Address already in use" in log.read()

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until both listeners answer a metadata request naming this broker: it then takes writes, and the
        client port is the JVM's, not another process's."""
        assert self.ports is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.alive():
                raise BrokerUnavailable(f"the local Kafka exited at start-up; see {self.log_file}")
            if port_open(self.host, self.ports.internal) and asyncio.run(self._answers()):
                return
            time.sleep(0.2)
        self.stop()
        raise BrokerUnavailable(f"the local Kafka did not get ready within {timeout_s:.0f}s; see {self.log_file}")

    async def _answers(self) -> bool:
        assert self.ports is not None
        client = Settings()
        if self.sasl_users:
            name, password = next(iter(self.sasl_users.items()))
            client = Settings(
                kafka_security_protocol="SASL_PLAINTEXT",
                kafka_sasl_mechanism="SCRAM-SHA-256",
                kafka_sasl_username=name,
                kafka_sasl_password=password,
            )
        listeners = [(self.ports.internal, Settings()), (self.ports.client, client)]
        return all([await self._names_this_broker(port, settings) for port, settings in listeners])

    async def _names_this_broker(self, port: int, settings: Settings) -> bool:
        admin = AIOKafkaAdminClient(bootstrap_servers=f"{self.host}:{port}", request_timeout_ms=3000, **auth(settings))
        try:
            await admin.start()
            cluster = await admin.describe_cluster()
            return bool(cluster.get("brokers"))
        except Exception:
            return False
        finally:
            with contextlib.suppress(Exception):
                await admin.close()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """A controlled shutdown: the broker flushes its log and closes its segments cleanly."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


if __name__ == "__main__":
    # `python -m callscreen.localkafka`: the install step's fetch (make runs it once per cache).
    try:
        print(fetch(os.environ.get("CALLSCREEN_KAFKA_HOME", "")))
    except BrokerUnavailable as exc:
        sys.exit(f"callscreen: {exc}")
