"""`infra.kafka.partition_for` picks the partition Kafka's own clients pick for a key."""

from __future__ import annotations

import random

import pytest
from aiokafka.partitioner import DefaultPartitioner, murmur2
from murmurhash2 import murmurhash2

from infra.kafka import MURMUR2_SEED, partition_for

# The Java client's murmur2 of these keys, as signed 32-bit integers.
JAVA_MURMUR2 = {
    "21": -973932308,
    "foobar": -790332482,
    "a-little-bit-long-string": -985981536,
    "a-little-bit-longer-string": -1486304829,
    "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    "abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), JAVA_MURMUR2.items())
def test_the_hash_is_the_java_clients(key: str, expected: int) -> None:
    unsigned = murmurhash2(key.encode(), MURMUR2_SEED)
    signed = unsigned - (1 << 32) if unsigned >= 1 << 31 else unsigned
    assert signed == expected
    assert partition_for(key, 12) == (expected & 0x7FFFFFFF) % 12


def test_every_key_lands_where_aiokafkas_partitioner_puts_it() -> None:
    # aiokafka picks the partition of every send that names none (Faust's forwards among them).
    rng = random.Random(7)
    keys = [f"acct_{rng.getrandbits(40):x}|+1{rng.randrange(10**10):010d}" for _ in range(2000)]
    keys += ["".join(chr(rng.randrange(32, 0x2FF)) for _ in range(rng.randrange(0, 40))) for _ in range(2000)]
    for key in keys:
        raw = key.encode()
        assert murmurhash2(raw, MURMUR2_SEED) == murmur2(raw)
        for partitions in (1, 4, 7, 12):
            expected = DefaultPartitioner()(raw, list(range(partitions)), list(range(partitions)))
            assert (key, partition_for(key, partitions)) == (key, expected)
