"""`python -m bench.memory`: every process's RSS as calls accumulate, toward 100,000 calls over 20,000
protected numbers; writes bench/out/memory.md (bench/out/memory-tansu.md with `--broker memory`). The
latest Kafka figures are copied into docs/benchmarks.md, "Memory, soak and overload".

Calls (start and end) are appended in rounds straight to the events topic (`bench/prefill.py`); after
each round the run waits for the worker to fold it, then reads every process's VmRSS (and the Kafka
broker's Java heap) and how busy the broker and the worker were. The run stops at the first round the
worker does not fold within `--drain-timeout`, or when `--budget` is spent. On Kafka it reaches the
100,000 calls; on the memory broker it stops long before: Tansu's fetch cost grows with a partition's
length (`docs/architecture.md`, "Partitions slow down as they grow").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from bench.prefill import prefill
from bench.run import OUT, Budget, loadavg, machine, snapshot_rss
from bench.service import BROKERS, Progress, Service, broker_label, create_accounts, start_service
from bench.traffic import NUMBERS_PER_ACCOUNT
from infra.ports import free_port_block

TARGET_CALLS = 100_000
# A non-strict LRU cache runs over its capacity: up to 49 MB against 32 MB (standalone: 24 databases,
# 100,000 to 300,000 rows of 1.1 KB).
ROCKSDB_OVERSHOOT = 1.5
# Seconds of rounds at most: on the local Kafka a round of 2,500 calls took 8 to 13 s on two cores, so the
# 40 rounds to 100,000 calls fit, and the whole run stays within about ten minutes.
BUDGET_S = 560.0
# The targets: (process, what is measured, MB).
TARGETS = (("worker", "rss_mb", 400.0), ("edge (callscreen run)", "rss_mb", 150.0), ("broker", "heap_used_mb", 512.0))


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process, or 0 when it is gone."""
    try:
        fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def rocksdb_mb(port: int) -> float | None:
    """The worker's `callscreen_rocksdb_bytes` in MB, or None when it does not answer."""
    with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError):
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http,
            http.get(f"http://127.0.0.1:{port}/metrics") as response,
        ):
            text = await response.text()
        for family in text_string_to_metric_families(text):
            if family.name == "callscreen_rocksdb_bytes":
                return round(family.samples[0].value / 1024 / 1024, 1)
    return None


async def measure(args: argparse.Namespace, service: Service) -> dict[str, Any]:
    accounts = await create_accounts(service, args.accounts)
    progress = Progress(service.settings)
    await progress.start()
    pids = service.processes()
    rows: list[dict[str, Any]] = [{"calls": 0, "rss": snapshot_rss(service)}]
    stopped = f"reached {args.calls:,} calls"
    budget = Budget(args.budget)
    try:
        calls = 0
        while calls < args.calls:
            if budget.left() <= 0:
                stopped = f"time budget of {args.budget:.0f} s spent"
                break
            size = min(args.round, args.calls - calls)
            cpu_before = {role: cpu_seconds(pid) for role, pid in pids.items()}
            round_started = time.monotonic()
            appended = await prefill(service.settings, accounts, size, offset=calls)
            calls += size
            drained = await progress.wait_drained(args.drain_timeout, slack=8)
            seconds = time.monotonic() - round_started
            busy = {role: round((cpu_seconds(pid) - cpu_before[role]) / seconds, 2) for role, pid in pids.items()}
            row = {
                "calls": calls,
                "append_per_s": appended["per_s"],
                "drained_s": None if drained == float("inf") else round(drained, 1),
                "lag": await progress.lag(),
                "cores_busy": busy,
                "rss": snapshot_rss(service),
                "rocksdb_mb": await rocksdb_mb(service.settings.metrics_port),
            }
            rows.append(row)
            print(f"[{budget.elapsed():6.1f}s] {row}", file=sys.stderr, flush=True)
            if drained == float("inf"):
                stopped = (
                    f"the worker did not fold round {len(rows) - 1} within {args.drain_timeout:.0f} s "
                    f"({row['lag']} records behind)"
                )
                break
    finally:
        await progress.stop()
    numbers = len(accounts) * NUMBERS_PER_ACCOUNT
    return {
        "rows": rows,
        "stopped": stopped,
        "numbers": numbers,
        "rocksdb_memory_mb": service.settings.rocksdb_memory_mb,
        "seconds": round(budget.elapsed(), 1),
    }


def render(results: dict[str, Any], command: str) -> str:
    m = results["machine"]
    rows = results["rows"]
    kafka = results["broker"] == "kafka"
    rerun = "make bench-memory" if kafka else "python -m bench.memory --broker memory"
    heap_head, heap_rule = (" broker heap used / committed |", "---:|") if kafka else ("", "")
    out = [
        "# Memory as calls accumulate",
        "",
        f"Written by `bench/memory.py`; rerun with `{rerun}`. The issue asks for every process's RSS",
        "after 100,000 calls across 20,000 numbers; this run appends calls in rounds, spread round-robin over",
        f"{results['numbers']:,} protected numbers, and reads VmRSS after the worker folded each round.",
        "",
        "## Run",
        "",
        f"- broker: {results['broker_label']}",
        f"- date: {results['date']}",
        f"- machine: {m.get('cores')} cores ({m.get('cpu', '?')}), {m.get('memory_gb', '?')} GB memory, "
        f"Python {m.get('python')}",
        f"- commit: {m.get('commit', '?')}",
        f"- command: `{command}`; rounds {results['seconds']} s, whole run {results['elapsed_s']} s",
        f"- load average at start / end: {results['loadavg_start']} / {results['loadavg_end']}",
        f"- stopped: {results['stopped']}",
        "",
        "## RSS (MB) after each round",
        "",
        "The worker's RocksDB: its `callscreen_rocksdb_bytes` gauge (block cache and memtables in use), part of",
        "its RSS. Folded in: from the round's last append (at least 1.2 s, the wait for a heartbeat after it).",
        "Cores busy: CPU seconds over the round's wall time (1.0 is one core), append and fold together.",
        *(
            [
                "Broker heap: the JVM's Java heap in use (live objects and garbage not yet collected) and committed,",
                "from `jcmd <pid> GC.heap_info` after the round; `-Xmx` caps the committed heap, RSS adds the JVM's",
                "own memory (metaspace, code cache, threads, direct buffers) and the page cache is not in it.",
            ]
            if kafka
            else []
        ),
        "",
        "| calls | append /s | folded in (s) | edge | worker | worker's RocksDB | broker |"
        + heap_head
        + " alerting | broker cores busy | worker cores busy |",
        "|---:|---:|---:|---:|---:|---:|---:|" + heap_rule + "---:|---:|---:|",
    ]
    for row in rows:
        rss = row["rss"]
        cells = [mb(rss, "edge (callscreen run)"), mb(rss, "worker")]
        cells.append("—" if row.get("rocksdb_mb") is None else str(row["rocksdb_mb"]))
        cells.append(mb(rss, "broker"))
        if kafka:
            cells.append(f"{mb(rss, 'broker', 'heap_used_mb')} / {mb(rss, 'broker', 'heap_committed_mb')}")
        cells.append(mb(rss, "alerting"))
        busy = row.get("cores_busy", {})
        out.append(
            f"| {row['calls']:,} | {row.get('append_per_s', '—')} | {folded_in(row)} | "
            + " | ".join(cells)
            + f" | {busy.get('broker', '—')} | {busy.get('worker', '—')} |"
        )
    out += ["", *targets(results), "## Reading it", "", *reading(results)]
    if not kafka and results["stopped"].startswith("the worker did not fold"):
        out.append(MEMORY_BROKER_NOTE)
    out.append("")
    return "\n".join(out)


def mb(rss: dict[str, Any], role: str, key: str = "rss_mb") -> str:
    return str(rss.get(role, {}).get(key, "—"))


def folded_in(row: dict[str, Any]) -> str:
    if "drained_s" not in row:
        return "—"
    return "not folded" if row["drained_s"] is None else str(row["drained_s"])


def targets(results: dict[str, Any]) -> list[str]:
    """The issue's memory targets against the highest value any round saw."""
    reached = results["rows"][-1]["calls"]
    short = "" if reached >= TARGET_CALLS else f", not the {TARGET_CALLS:,} the issue asks about"
    out = [
        "## Targets",
        "",
        f"The highest value seen after any round, up to {reached:,} calls{short}.",
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
    ]
    for role, key, limit in TARGETS:
        if key == "heap_used_mb" and results["broker"] != "kafka":
            continue  # Tansu is not a JVM
        peak = max((float(r["rss"][role][key]) for r in results["rows"] if key in r["rss"].get(role, {})), default=None)
        what = "Java heap in use" if key == "heap_used_mb" else "RSS"
        measured = "not measured" if peak is None else f"{peak:.1f} MB"
        verdict = "n/a" if peak is None else ("met" if peak <= limit else "**missed**")
        out.append(f"| {role} {what} ≤ {limit:.0f} MB | {measured} | {verdict} |")
    return [*out, ""]


def reading(results: dict[str, Any]) -> list[str]:
    """What the folded rounds say about the worker at the issue's 100,000 calls."""
    folded = [r for r in results["rows"][1:] if r.get("drained_s") is not None and r.get("rocksdb_mb") is not None]
    if len(folded) < 2:
        return ["- Fewer than two rounds were folded: nothing to read."]
    first, last = folded[0], folded[-1]

    def rest(row: dict[str, Any]) -> float:
        return float(row["rss"]["worker"]["rss_mb"]) - float(row["rocksdb_mb"])

    calls = last["calls"] - first["calls"]
    per_call = (rest(last) - rest(first)) / calls
    rocks_cap = results["rocksdb_memory_mb"] * ROCKSDB_OVERSHOOT
    out = [
        f"- From {first['calls']:,} to {last['calls']:,} calls the worker's RSS went from "
        f"{first['rss']['worker']['rss_mb']} to {last['rss']['worker']['rss_mb']} MB; its RocksDB from "
        f"{first['rocksdb_mb']} to {last['rocksdb_mb']} MB, and the rest from {rest(first):.1f} to {rest(last):.1f} MB "
        f"({per_call * 1000:.2f} MB per thousand calls).",
        f"- RocksDB's cache is held near the worker's budget (`rocksdb_memory_mb`, {results['rocksdb_memory_mb']} "
        "MB: data blocks and memtables) whatever the tables hold; it was seen to run up to half over its capacity "
        "(standalone: 24 databases, up to 300,000 rows). Index and filter blocks are outside it, in the RSS "
        "(processors/state/rocks.py).",
    ]
    if last["calls"] < TARGET_CALLS:
        estimate = rest(last) + max(per_call, 0.0) * (TARGET_CALLS - last["calls"]) + rocks_cap
        out.append(
            f"- Extrapolated, not measured: were the rest to keep growing at that rate, the worker would hold about "
            f"{estimate:.0f} MB at {TARGET_CALLS:,} calls (the rest, plus RocksDB at {rocks_cap:.0f} MB); the target "
            "is 400 MB."
        )
    return out


MEMORY_BROKER_NOTE = """- On the memory broker the rounds slow down and then stop being folded long before 100,000
  calls: each fetch costs time in proportion to the records already in its partitions, so the broker,
  not the worker, runs out of CPU (its cores busy above). The measured 100,000-call figures are the
  Kafka run's (`make bench-memory`, `bench/out/memory.md`)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__)
    parser.add_argument("--broker", choices=BROKERS, default="kafka", help="the local Apache Kafka, or Tansu")
    parser.add_argument("--calls", type=int, default=TARGET_CALLS, help="calls to reach")
    parser.add_argument("--round", type=int, default=2_500, help="calls appended per round")
    parser.add_argument("--accounts", type=int, default=800, help="guard accounts, 25 protected numbers each")
    parser.add_argument("--drain-timeout", type=float, default=60.0, help="seconds the worker gets per round")
    parser.add_argument("--budget", type=float, default=BUDGET_S, help="seconds of rounds at most")
    parser.add_argument("--out", type=Path, help="the report (default bench/out/memory.md, -tansu.md on memory)")
    args = parser.parse_args(argv)
    args.out = args.out or OUT / ("memory.md" if args.broker == "kafka" else "memory-tansu.md")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    started = time.monotonic()
    results: dict[str, Any] = {"machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    results.update(broker=args.broker, broker_label=broker_label(args.broker), loadavg_start=loadavg())
    with tempfile.TemporaryDirectory(prefix="callscreen-memory-") as tmp:
        # The worker serves Prometheus here: its RocksDB budget in use is read after every round.
        os.environ["CALLSCREEN_METRICS_PORT"] = str(free_port_block(2))
        service = start_service(Path(tmp) / "service", broker=args.broker)
        try:
            results.update(asyncio.run(measure(args, service)))
        finally:
            service.stop()
    results["loadavg_end"] = loadavg()
    results["elapsed_s"] = round(time.monotonic() - started, 1)
    command = "python -m bench.memory " + " ".join(argv if argv is not None else sys.argv[1:])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(results, command.strip()) + "\n")
    print(f"wrote {args.out}: {results['stopped']}", file=sys.stderr)


if __name__ == "__main__":
    main()
