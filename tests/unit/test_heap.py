"""`infra.heap.map_large_blocks`: a large block freed goes back to the system, on glibc."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Frees a mapped 1 MB block, then asks for 512 KB (a RocksDB memtable arena block) and prints whether it
# came from the main heap, in a fresh process so the C library's settings start from its defaults.
PROBE = """
import ctypes, sys
sys.path.insert(0, sys.argv[2])
from infra.heap import map_large_blocks
if sys.argv[1] == "map":
    assert map_large_blocks()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
heap = next(line.split()[0] for line in open("/proc/self/maps") if line.rstrip().endswith("[heap]"))
low, high = (int(end, 16) for end in heap.split("-"))
libc.free(libc.malloc(1 << 20))
block = libc.malloc(512 << 10)
print(low <= block < high)
"""


def from_main_heap(mode: str) -> bool:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode, str(ROOT)], capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout.strip() == "True"


def test_glibc_alone_serves_a_large_block_from_the_heap_after_one_was_freed() -> None:
    # What the worker corrects: the threshold rose to 1 MB when the first block was freed.
    assert from_main_heap("defaults")


def test_with_the_threshold_kept_a_large_block_gets_pages_of_its_own() -> None:
    assert not from_main_heap("map")
