"""Ports to listen on: single ones and blocks for settings that number their roles' ports from a base."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys

import pytest

from infra.ports import BLOCK_RANGE, free_port, free_port_block, free_ports, listens, port_open


def test_a_block_is_below_the_ephemeral_range_and_skips_a_port_in_use() -> None:
    base = free_port_block(2)
    assert BLOCK_RANGE[0] <= base and base + 1 < BLOCK_RANGE[1] <= 32768
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", base + 1))
        held.listen()
        for _ in range(50):
            other = free_port_block(2)
            assert base + 1 not in (other, other + 1)


def test_free_ports_are_below_the_ephemeral_range_different_and_skip_a_port_in_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first, second = free_ports(2)
    assert first != second and all(BLOCK_RANGE[0] <= port < BLOCK_RANGE[1] for port in (first, second))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", free_port()))
        taken = held.getsockname()[1]
        # The draws: the held port, then the first free one twice, then the second.
        draws = iter([taken, first, first, second])
        monkeypatch.setattr(random, "randrange", lambda *_: next(draws))
        assert free_ports(2) == [first, second]


def test_listens_tells_the_process_that_bound_a_port_from_one_that_only_finds_it_open() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", free_port()))
        mine = held.getsockname()[1]
        assert not listens(os.getpid(), mine)  # bound, not listening yet
        held.listen()
        assert listens(os.getpid(), mine)
    listener = (
        "import socket, sys; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); "
        "print(s.getsockname()[1], flush=True); sys.stdin.read()"
    )
    other = subprocess.Popen([sys.executable, "-c", listener], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout is not None
        theirs = int(other.stdout.readline())
        assert port_open("127.0.0.1", theirs)
        assert listens(other.pid, theirs)
        assert not listens(os.getpid(), theirs)
    finally:
        other.kill()
        other.wait()
