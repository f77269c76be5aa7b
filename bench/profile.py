"""py-spy sampling of a running process; the top functions by own (leaf) and total samples."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any


def py_spy() -> str | None:
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


async def record(pid: int, seconds: int, out: Path, form: str = "raw") -> asyncio.subprocess.Process | None:
    """Start `py-spy record` in `form` (raw collapsed stacks, or a flamegraph SVG); returns the process to await."""
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
        "--nonblocking",
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


def top_functions(collapsed: Path, count: int = 12) -> dict[str, Any]:
    """From py-spy's collapsed stacks: (function, own %, total %) rows, the busiest first by own time."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    if not collapsed.exists():
        return {"samples": 0, "rows": []}
    for line in collapsed.read_text(errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        weight = int(n)
        frames = [f.strip() for f in stack.split(";") if f.strip()]
        frames = [f for f in frames if not f.startswith("process ") and not f.startswith("thread ")]
        if not frames:
            continue
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
