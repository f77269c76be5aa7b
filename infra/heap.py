"""The cyclic garbage collector, what a service has built before it serves, and the C heap."""

from __future__ import annotations

import ctypes
import gc

# The worker's collector thresholds (generations 0, 1, 2); Python's are 700, 10, 10.
FOLD_THRESHOLDS = (2000, 20, 100)
# glibc's mallopt parameter number for M_MMAP_THRESHOLD (malloc.h).
M_MMAP_THRESHOLD = -3
# glibc's starting threshold: a block this large or larger gets pages of its own.
MMAP_THRESHOLD_BYTES = 128 * 1024


def freeze_startup_objects() -> None:
    """Move every object alive now (modules, their tables, the app) out of the collector's view.

    A full collection walks every tracked object. A worker imports Faust, aiokafka and their
    dependencies, and each full collection took 40 ms on average (59 ms at most) while serving
    turn traffic: a pause every request in flight waited out. Objects made before serving live as
    long as the process, so the collector need never look at them again
    (docs/decisions/0003-collector-frozen-and-in-larger-steps.md).
    """
    gc.collect()
    gc.freeze()


def collect_less_often() -> None:
    """Collect the worker's young objects in larger steps, and the older generations far less often.

    A collection finds almost nothing to free in a fold: its cost is walking what survives (records
    buffered, acks pending, values kept). At Python's thresholds the collector took 16.3 µs of CPU a
    record, 19 full collections of 19 ms each in 48,000 records, and its longest pause was 39.6 ms; at
    these, 7.9 µs, none, and 19.7 ms (docs/decisions/0003-collector-frozen-and-in-larger-steps.md). A full
    collection still comes every hundred middle ones, for whatever cyclic garbage there is.
    """
    gc.set_threshold(*FOLD_THRESHOLDS)


def map_large_blocks() -> bool:
    """Keep glibc's mmap threshold at 128 KB, so a large block freed goes back to the system.

    glibc raises the threshold to the size of each mapped block that is freed, up to 32 MB. RocksDB's
    memtable arena blocks (512 KB here) are allocated and freed all the time, so after the first few
    they came from the main heap, where the holes they left kept the worker's RSS growing in a long run
    (docs/decisions/0020-worker-memory-in-the-soak.md). False where the C library has no
    `mallopt` (not glibc): nothing changes there.
    """
    # The process's own symbols, the C library's among them: no search for the library's file.
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
