"""py-spy sampling of a running process; the top functions by own (leaf) and total samples."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import Any


def py_spy() -> str | None:
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


async def record(
    pid: int, seconds: int, out: Path, form: str = "raw", gil: bool = False
) -> asyncio.subprocess.Process | None:
    """Start `py-spy record` in `form` (raw collapsed stacks, or a flamegraph SVG); returns the process to await.

    With `gil`, only samples of a thread holding the GIL (where the CPU went, without the waits), taken
    with the process paused: read while it runs, a stack is often cut short and its sample lands in the
    wrong part (`parts`)."""
    binary = py_spy()
    if binary is None:
        return None
    return await asyncio.create_subprocess_exec(
        binary,
        "record",
        "--pid",
        str(pid),
        "--duration",
        str(seconds),
        "--rate",
        "200",
        "--format",
        form,
        *(["--gil"] if gil else ["--nonblocking"]),
        "--output",
        str(out),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True,
    )


async def finish(process: asyncio.subprocess.Process, timeout_s: float) -> None:
    try:
        await asyncio.wait_for(process.wait(), timeout_s)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


async def stop(process: asyncio.subprocess.Process, timeout_s: float) -> None:
    """Stop a recording before its duration is up; py-spy writes what it has on SIGINT."""
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGINT)
    await finish(process, timeout_s)


def stacks(collapsed: Path) -> list[tuple[list[str], int]]:
    """py-spy's collapsed stacks: each sample's frames (`func (path:line)`, root first) and its weight."""
    found: list[tuple[list[str], int]] = []
    if not collapsed.exists():
        return found
    for line in collapsed.read_text(errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        frames = [f.strip() for f in stack.split(";") if f.strip()]
        frames = [f for f in frames if not f.startswith("process ") and not f.startswith("thread ")]
        if frames:
            found.append((frames, int(n)))
    return found


# Where a folding worker's CPU goes. A sample under one of the folds is that fold's, whatever it calls (its
# appends through aiokafka included). Any other sample belongs to the library of its deepest frame that is
# in one: the Faust and mode frames between the consumer and the feeds, aiokafka's fetches and produce
# requests, or the worker's own bookkeeping. The worker's loop (`mode/worker.py`) is the root of every stack.
FOLD_PARTS: list[tuple[str, tuple[str, ...]]] = [
    ("folding events: the call, its tables and view, its appends", ("fold_event (processors/folds/calls.py",)),
    ("the detector's fold of each fact", ("observe (processors/folds/detectors.py",)),
    (
        "changelog and view flushes",
        ("Commits.flush (processors/folds/commits.py", "Outbox._drain (processors/output/appender.py"),
    ),
]
LIBRARY_PARTS: list[tuple[str, tuple[str, ...]]] = [
    ("Kafka's client: fetches, produce requests, the protocol", ("(aiokafka/",)),
    ("Faust and mode: the consumer's drain loop, the conductor, timers", ("(faust/", "(mode/")),
    ("the worker's own bookkeeping: commits, progress, barrier, mirror, heartbeats", ("(processors/", "(infra/")),
]
LOOP_ROOT = "Worker.execute_from_commandline (mode/worker.py"
LOOP = "the event loop itself: callbacks and I/O with no Python frame"


def part_of(frames: list[str]) -> str:
    """The part of `FOLD_PARTS`, then `LIBRARY_PARTS`, one sample belongs to."""
    root = next((i for i, f in enumerate(frames) if f.startswith(LOOP_ROOT)), -1)
    above = frames[root + 1 :]
    for name, marks in FOLD_PARTS:
        if any(f.startswith(m) for f in above for m in marks):
            return name
    for frame in reversed(above):
        for name, marks in LIBRARY_PARTS:
            if any(m in frame for m in marks):
                return name
    return LOOP if not above else "other"


def parts(collapsed: Path) -> dict[str, Any]:
    """Each part's share of the samples, in the order of `FOLD_PARTS` and `LIBRARY_PARTS`."""
    shares: Counter[str] = Counter()
    for frames, weight in stacks(collapsed):
        shares[part_of(frames)] += weight
    samples = sum(shares.values())
    order = [name for name, _ in FOLD_PARTS + LIBRARY_PARTS] + [LOOP, "other"]
    return {"samples": samples, "rows": [(name, round(100.0 * shares[name] / samples, 1)) for name in order if samples]}


def top_functions(collapsed: Path, count: int = 12) -> dict[str, Any]:
    """From py-spy's collapsed stacks: (function, own %, total %) rows, the busiest first by own time."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for frames, weight in stacks(collapsed):
        samples += weight
        own[short(frames[-1])] += weight
        for frame in {short(f) for f in frames}:
            total[frame] += weight
    rows = [
        (name, round(100.0 * n / samples, 1), round(100.0 * total[name] / samples, 1))
        for name, n in own.most_common(count)
    ]
    return {"samples": samples, "rows": rows}


def short(frame: str) -> str:
    """`func (path/to/module.py:123)` -> `func (module.py)`: one row per function, not per line."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    parts = Path(path).parts
    tail = "/".join(parts[-2:]) if len(parts) >= 2 else path
    return f"{name} ({tail})"
