"""Loopback ports: a free one to listen on, and whether something already listens on one."""

from __future__ import annotations

import random
import socket
import time

# Below Linux's ephemeral range (32768-60999), so no outgoing connection can take a port picked here.
BLOCK_RANGE = (20000, 32000)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` different free ports: each socket stays bound until all are chosen, since ports picked one
    at a time can repeat (the kernel may hand a just-closed ephemeral port out again)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind((host, 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def free_port_block(count: int, host: str = "127.0.0.1") -> int:
    """The first of `count` consecutive ports that are free now, for settings that number their roles'
    ports from a base (`metrics_port`: worker N on base + N, alerting after the workers)."""
    for _ in range(200):
        base = random.randrange(*BLOCK_RANGE)
        sockets: list[socket.socket] = []
        try:
            for port in range(base, base + count):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sockets.append(sock)
                sock.bind((host, port))
            return base
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise OSError(f"no {count} consecutive free ports in {BLOCK_RANGE}")


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def wait_for_port(host: str, port: int, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if port_open(host, port):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout_s}s")
