"""The cyclic garbage collector, what a service has built before it serves, and the C heap."""

from __future__ import annotations

import ctypes
import gc

# glibc's mallopt parameter number for M_MMAP_THRESHOLD (malloc.h).
M_MMAP_THRESHOLD = -3
# glibc's starting threshold: a block this large or larger gets pages of its own.
MMAP_THRESHOLD_BYTES = 128 * 1024


def freeze_startup_objects() -> None:
    """Move every object alive now (modules, their tables, the app) out of the collector's view.

    A full collection walks every tracked object. A worker imports Faust, aiokafka and their
    dependencies, and each full collection took 40 ms on average (59 ms at most) while serving
    turn traffic: a pause every request in flight waited out. Objects made before serving live as
    long as the process, so the collector need never look at them again (docs/profiles/README.md).
    """
    gc.collect()
    gc.freeze()


def map_large_blocks() -> bool:
    """Keep glibc's mmap threshold at 128 KB, so a large block freed goes back to the system.

    glibc raises the threshold to the size of each mapped block that is freed, up to 32 MB. RocksDB's
    memtable arena blocks (512 KB here) are allocated and freed all the time, so after the first few
    they came from the main heap, where the holes they left kept the worker's RSS growing in a long run
    (docs/profiles/README.md, "The worker's memory in the soak"). False where the C library has no
    `mallopt` (not glibc): nothing changes there.
    """
    # The process's own symbols, the C library's among them: no search for the library's file.
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
