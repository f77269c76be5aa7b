"""Loopback ports: a free one to listen on, and whether something already listens on one."""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

# Below Linux's ephemeral range (32768-60999), so no outgoing connection can take a port picked here.
BLOCK_RANGE = (20000, 32000)


def free_port(host: str = "127.0.0.1") -> int:
    return free_ports(1, host)[0]


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` different ports, each free now, below the ephemeral range: a port from that range can go to
    any outgoing connection on the machine in the moment before its listener binds it."""
    chosen: list[int] = []
    for _ in range(200 * count):
        port = random.randrange(*BLOCK_RANGE)
        if port not in chosen and bindable(host, port):
            chosen.append(port)
            if len(chosen) == count:
                return chosen
    raise OSError(f"no {count} free ports in {BLOCK_RANGE}")


def bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def free_port_block(count: int, host: str = "127.0.0.1") -> int:
    """The first of `count` consecutive ports that are free now, for settings that number their roles'
    ports from a base (`metrics_port`: worker N on base + N, alerting after the workers)."""
    for _ in range(200):
        base = random.randrange(BLOCK_RANGE[0], BLOCK_RANGE[1] - count)
        if all(bindable(host, port) for port in range(base, base + count)):
            return base
    raise OSError(f"no {count} consecutive free ports in {BLOCK_RANGE}")


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def listens(pid: int, port: int) -> bool:
    """Whether process `pid` itself holds a listening TCP socket on `port` (Linux's /proc).

    That something answers on a port picked for a process does not say the process bound it: another
    one may have taken the port between the pick and the bind, and the process then failed to."""
    sockets = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            # Local address as hex "address:port", state 0A is LISTEN, the socket's inode.
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                sockets.add(f"socket:[{fields[9]}]")
    if not sockets:
        return False
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(fd) in sockets:
                return True
        except OSError:
            continue  # closed since the listing
    return False
