"""Ports to listen on: single ones and blocks for settings that number their roles' ports from a base."""

from __future__ import annotations

import random
import socket

import pytest

from infra.ports import BLOCK_RANGE, free_port, free_port_block, free_ports


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
