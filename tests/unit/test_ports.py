"""Port blocks for settings that number their roles' ports from a base."""

from __future__ import annotations

import socket

from infra.ports import BLOCK_RANGE, free_port_block


def test_a_block_is_below_the_ephemeral_range_and_skips_a_port_in_use() -> None:
    base = free_port_block(2)
    assert BLOCK_RANGE[0] <= base and base + 1 < BLOCK_RANGE[1] <= 32768
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", base + 1))
        held.listen()
        for _ in range(50):
            other = free_port_block(2)
            assert base + 1 not in (other, other + 1)
