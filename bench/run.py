"""`python -m bench.run`: drive the real service and its baselines, write docs/benchmarks.md.

Everything runs on loopback, inside a time budget (default 440 s, so `make bench` and the gate's section
stay under ten minutes; `--profile` adds `PROFILE_S` for its three profiles): phases that no longer fit
are skipped and the report says so. `--broker kafka` (the default) runs the service on the local Apache
Kafka `callscreen run` starts and writes docs/benchmarks.md;
`--broker memory` runs it on the in-memory development broker (Tansu) and writes bench/out/tansu.md, and
`--profile` writes bench/out/profile.md with its flame graphs in bench/out/profiles/: bench/out/ is not
kept in git, so docs/ holds only the latest plain run on Kafka.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import profile, report
from bench.loadgen import in_process
from bench.prefill import copy_records, prefill
from bench.service import (
    BROKERS,
    Progress,
    Service,
    broker_label,
    cpu_seconds,
    create_accounts,
    create_topic,
    fold_done_at,
    fold_rates,
    fold_steps,
    jvm_heap_mb,
    rss_mb,
    start_service,
    stop_process,
)
from bench.traffic import NUMBERS_PER_ACCOUNT, BenchAccount
from infra.ports import free_port
from infra.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
P99_TARGET_MS = 50.0
# Full reports other than docs/benchmarks.md, and the flame graphs: not kept in git (.gitignore).
OUT = ROOT / "bench" / "out"
PROFILES = OUT / "profiles"
# The bare server reaches the top on this host at full speed (its bound is the load generator, on the same
# two cores): a floor there is a lower bound, and the edge's ratio to it an upper one (`report.edge_verdict`).
LADDER: list[float] = [
    25,
    50,
    100,
    150,
    200,
    300,
    400,
    500,
    750,
    1000,
    1250,
    1500,
    1750,
    2000,
    2500,
    3000,
    4000,
    5000,
    6000,
]
BARE_TOPIC = "callscreen-bench.bare"
# Each backlog of the fold phase, copied for the Faust floor (a topic a round, its number appended).
FLOOR_TOPIC = "callscreen-bench.floor"
# Backlogs the fold phase folds, each beside stock Faust (`fold_rounds`).
FOLD_ROUNDS = 3
# Calls a round the fold phase can afford per second left in the budget: with them it appends and folds
# each round's backlog beside stock Faust and runs the other floors over the first (about 115 s for
# 16,000 calls a round), after a fresh service's start.
FOLD_CALLS_PER_S = 130
# Calls the worker folds while py-spy watches it (`--profile`): some ten seconds of its CPU.
PROFILE_FOLD_CALLS = 6000
# What `--profile` adds to the budget: the fold's profile and the turns' and starts' (10 s of load each),
# each with the wait for the worker to drain. Without it they took the time of the last measures, or
# found none left.
PROFILE_S = 90.0
NO_PY_SPY = "py-spy is not installed (.venv/bin/pip install py-spy)"


@dataclass
class Budget:
    seconds: float
    started: float = field(default_factory=time.monotonic)

    def left(self) -> float:
        return self.seconds - (time.monotonic() - self.started)

    def elapsed(self) -> float:
        return time.monotonic() - self.started


@dataclass
class Bench:
    args: argparse.Namespace
    budget: Budget
    service: Service
    accounts: list[BenchAccount]
    progress: Progress
    results: dict[str, Any]
    calls_driven: int = 0
    # Every service this run started, for the log summary.
    log_paths: list[Path] = field(default_factory=list)

    async def fresh_service(self, phase: str) -> None:
        """On the memory broker, start `phase` on a new service and broker: Tansu's fetches slow down as
        its partitions fill (see the partition growth phase), so a phase run after others would be
        measuring what they left in the broker. Kafka's fetch cost does not depend on a partition's
        length: there one service serves the whole run."""
        if self.args.broker != "memory":
            return
        await self.progress.stop()
        await asyncio.to_thread(self.service.stop)
        data_dir = self.service.data_dir.with_name(f"service-{len(self.log_paths) + 1}")
        self.service = await asyncio.to_thread(start_service, data_dir, broker=self.args.broker)
        self.log_paths.append(self.service.log_path)
        self.accounts = await create_accounts(self.service, self.args.accounts)
        self.progress = Progress(self.service.settings)
        await self.progress.start()
        self.results.setdefault("fresh_services", []).append(phase)
        self.log(f"fresh service on {self.service.base_url} for {phase}")

    def log(self, message: str) -> None:
        print(f"[{self.budget.elapsed():6.1f}s] {message}", file=sys.stderr, flush=True)

    async def loadgen(
        self,
        base_url: str,
        mode: str,
        rate: float,
        duration_s: float,
        prefix: str,
        track_lag: bool = True,
        edge_pid: int | None = None,
    ) -> dict[str, Any]:
        """One open-loop run in its own process; samples the workers' lag while it runs.

        `edge_pid`: the process that answers in the edge's place (the bare server), for the CPU column."""
        spec = {
            "base_url": base_url,
            "accounts": [a.to_json() for a in self.accounts],
            "mode": mode,
            "rate": rate,
            "duration_s": duration_s,
            "warmup_s": min(1.0, duration_s / 5),
            "prefix": prefix,
            "seed": len(prefix) + int(rate),
            "call_offset": self.calls_driven,
            "close_rate": float(self.args.close_rate),
        }
        max_lag = 0
        lag_task: asyncio.Task[None] | None = None

        async def sample_lag() -> None:
            nonlocal max_lag
            while True:
                await asyncio.sleep(0.5)
                max_lag = max(max_lag, await self.progress.lag())

        if track_lag:
            lag_task = asyncio.create_task(sample_lag())
        cpu = CpuShares(self.service, edge_pid)
        try:
            result = await in_process(spec)
        finally:
            if lag_task is not None:
                lag_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await lag_task
        self.calls_driven += int(result.get("calls", 0))
        result["max_lag"] = max_lag if track_lag else None
        result["cpu_pct"] = cpu.shares()
        s = result["all"]
        self.log(
            f"{prefix}: {mode} @ {rate:g}/s -> ok {result['throughput_ok_per_s']}/s p50 {s['p50_ms']} "
            f"p99 {s['p99_ms']} p99.9 {s['p999_ms']} errors {s['errors']} max lag {result['max_lag']}"
        )
        return result

    async def settle(self, timeout_s: float = 30.0) -> float:
        """Wait for the worker to fold what the last run left behind, so runs do not overlap."""
        wait_s = min(timeout_s, max(1.0, self.budget.left() - 5))
        waited = await self.progress.wait_drained(wait_s, slack=8)
        if waited == float("inf"):
            self.log(f"worker still behind after {wait_s:.0f}s (lag {await self.progress.lag()})")
        return waited

    async def search(
        self, name: str, drive: Callable[[float], Awaitable[dict[str, Any]]], start: float, step_cost: float
    ) -> dict[str, Any]:
        """Step the offered rate along LADDER until a passing rate sits next to a failing one."""
        index = LADDER.index(start)
        steps: list[dict[str, Any]] = []
        passed: set[float] = set()
        failed: set[float] = set()
        while self.budget.left() > step_cost:
            rate = LADDER[index]
            result = await drive(rate)
            steps.append(result)
            if sustainable(result):
                passed.add(rate)
                if index + 1 >= len(LADDER) or LADDER[index + 1] in failed:
                    break
                index += 1
            else:
                failed.add(rate)
                if index == 0 or LADDER[index - 1] in passed:
                    break
                index -= 1
        else:
            self.log(f"{name}: search stopped by the time budget")
        best = max(passed, default=None)
        topped = best == LADDER[-1]
        return {"steps": steps, "sustainable": best, "complete": bool(failed and passed) or topped, "topped": topped}


# A CPU reading: the monotonic clock, each process's CPU seconds, and this process's reaped children's.
CpuReading = tuple[float, dict[str, float | None], float]


class CpuShares:
    """Each process's CPU over a load run, in percent of one core: where a machine's two cores went."""

    def __init__(self, service: Service, edge_pid: int | None = None) -> None:
        self.pids = {role_name(name): pid for name, pid in service.processes().items()}
        if edge_pid is not None:
            self.pids["edge"] = edge_pid
        self.start = self._read()

    def shares(self) -> dict[str, float]:
        return self._since(self.start, self._read())

    def lap(self) -> dict[str, float]:
        """The shares since the last lap (or the start); the next lap starts from the same reading."""
        now = self._read()
        out = self._since(self.start, now)
        self.start = now
        return out

    def _read(self) -> CpuReading:
        # The load generator is a child of this process, reaped when its run ends.
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        spent = {name: cpu_seconds(pid) for name, pid in self.pids.items()}
        return time.monotonic(), spent, children.ru_utime + children.ru_stime

    @staticmethod
    def _since(before: CpuReading, after: CpuReading) -> dict[str, float]:
        wall = max(after[0] - before[0], 1e-9)
        out: dict[str, float] = {}
        for name, spent in after[1].items():
            was = before[1].get(name)
            if was is not None and spent is not None:
                out[name] = round(100 * (spent - was) / wall)
        out["load"] = round(100 * (after[2] - before[2]) / wall)
        return out


def role_name(process: str) -> str:
    """`edge (callscreen run)` -> `edge`: the report's column names."""
    return process.split(" ", 1)[0]


def sustainable(result: dict[str, Any]) -> bool:
    s = result["all"]
    p99 = s["p99_ms"]
    return p99 is not None and p99 < P99_TARGET_MS and s["errors"] <= 0.01 * max(1, s["count"])


async def run_module(module: str, *args: str, timeout_s: float, stderr: int | None = None) -> bytes | None:
    """Run `python -m module args` in its own process group; its stdout, or None when it overran."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        module,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr,
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        out, _ = await asyncio.wait_for(process.communicate(), timeout_s)
        return out
    except TimeoutError:
        return None
    finally:
        if process.returncode is None:
            os.killpg(process.pid, 9)
            await process.wait()


async def bare_consumer(broker: str, topic: str) -> dict[str, Any]:
    out = await run_module("bench.baselines", "consume", "--broker", broker, "--topic", topic, timeout_s=60)
    if out is None:
        raise TimeoutError("the bare consumer did not finish within 60 s")
    return dict(json.loads(out))


async def faust_floor(settings: Settings, tables: int, topic: str) -> dict[str, Any]:
    out = await run_module(
        "bench.faust_floor",
        *("--broker", settings.broker, "--topic", topic),
        *("--partitions", str(settings.partitions), "--tables", str(tables)),
        timeout_s=90,
        stderr=asyncio.subprocess.DEVNULL,
    )
    if out is None:
        return {"tables": tables, "error": "no result within 90 s"}
    # Its one line, or nothing when it stopped before its result.
    return dict(json.loads(out)) if out.strip() else {"tables": tables, "error": "no result printed"}


async def lean_floor(settings: Settings, topic: str) -> dict[str, Any]:
    """A backlog (the whole of `topic`, a copy of the fold phase's first) folded without Faust."""
    out = await run_module(
        "bench.lean_floor",
        *("--broker", settings.broker, "--topic", topic, "--partitions", str(settings.partitions)),
        timeout_s=60,
    )
    return {"error": "no result within 60 s"} if out is None else dict(json.loads(out))


async def domain_floor(accounts: int, calls: int) -> dict[str, Any]:
    out = await run_module("bench.domain_floor", "--accounts", str(accounts), "--calls", str(calls), timeout_s=60)
    return {"error": "no result within 60 s"} if out is None else dict(json.loads(out))


async def partition_growth(broker: str) -> list[dict[str, Any]]:
    out = await run_module("bench.partition_growth", "--broker", broker, timeout_s=90) or b""
    return [dict(json.loads(line)) for line in out.decode().splitlines() if line.startswith("{")]


def start_bare_server(broker: str, log_path: Path) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    command = [sys.executable, "-m", "bench.baselines", "serve", "--broker", broker, "--topic", BARE_TOPIC]
    with open(log_path, "a") as log:
        process = subprocess.Popen(
            [*command, "--port", str(port)],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            cwd=ROOT,
            start_new_session=True,
        )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("bare ready on "):
        stop_process(process)
        raise RuntimeError(f"bare server did not start; see {log_path}")
    return process, line.removeprefix("bare ready on ").strip()


def snapshot_rss(service: Service) -> dict[str, Any]:
    """VmRSS and VmHWM of every process of the service; the Kafka broker's Java heap too."""
    out: dict[str, Any] = {}
    for role, pid in service.processes().items():
        values = rss_mb(pid)
        if values is not None:
            out[role] = {"pid": pid, "rss_mb": round(values[0], 1), "hwm_mb": round(values[1], 1)}
    heap = None if service.settings.memory_broker else jvm_heap_mb(service.broker_pid)
    if heap is not None and "broker" in out:
        out["broker"].update(heap_used_mb=round(heap[0], 1), heap_committed_mb=round(heap[1], 1))
    return out


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def host_speed_s() -> float:
    """Seconds a plain Python loop of 10M additions takes now. A shared VM slows down when its neighbours
    are busy, and every figure of the run with it; this loop's time, compared across runs, shows by how
    much."""
    started = time.perf_counter()
    total = 0
    for i in range(10_000_000):
        total += i
    return round(time.perf_counter() - started, 2)


async def phases(bench: Bench) -> None:
    """The scenarios in priority order: what the targets need first, the extras while time is left."""
    args, results = bench.args, bench.results
    svc = bench.service
    results["loadavg_start"] = loadavg()
    results["host_speed_start_s"] = host_speed_s()

    # (a) call.started only at a fixed rate, after as long at that rate unmeasured: right after start-up
    # the broker's JVM is still compiling (it spent twice the CPU for the same load in the first seconds).
    if args.warmup_seconds > 0:
        bench.log(f"warm-up: call.started at {args.start_rate}/s for {args.warmup_seconds}s, not measured")
        results["warmup"] = await bench.loadgen(svc.base_url, "starts", args.start_rate, args.warmup_seconds, "w")
        await bench.settle()
    bench.log(f"scenario a: call.started at {args.start_rate}/s for {args.start_seconds}s")
    results["starts_fixed"] = await bench.loadgen(svc.base_url, "starts", args.start_rate, args.start_seconds, "a")
    await bench.settle(45)
    # The same for an agent's outbound starts, which must answer within the same p99 (decisions section 18).
    bench.log(f"scenario a, outbound: call.started at {args.start_rate}/s for {args.start_seconds}s")
    results["outbound_fixed"] = await bench.loadgen(svc.base_url, "outbound", args.start_rate, args.start_seconds, "ao")
    await bench.settle(45)

    # (b) full calls (turn traffic): the sustainable rate.
    await bench.fresh_service("turn traffic")
    svc = bench.service

    async def drive_calls(rate: float) -> dict[str, Any]:
        result = await bench.loadgen(svc.base_url, "calls", rate, args.step_seconds, f"turns{int(rate)}")
        await bench.settle()
        return result

    bench.log("scenario b: turn traffic, step search")
    turns = await bench.search("turns", drive_calls, args.turn_start, step_cost=args.reserve + 40)
    turns["fractions"] = {}
    results["turns"] = turns
    # ... and 50% and 80% of it (100% is the search's own step).
    if turns["sustainable"]:
        for fraction in (0.5, 0.8):
            if bench.budget.left() < args.reserve + 15:
                break
            turns["fractions"][str(fraction)] = await drive_calls(max(1, round(turns["sustainable"] * fraction)))

    # Baseline (a): the bare server, same load generator, same traffic.
    if bench.budget.left() > 45:
        await create_topic(svc.settings, BARE_TOPIC, svc.settings.partitions)
        bare, bare_url = start_bare_server(svc.settings.broker, svc.log_path.with_name("bare.log"))
        try:

            async def drive_bare(rate: float) -> dict[str, Any]:
                return await bench.loadgen(
                    bare_url, "calls", rate, args.step_seconds, f"bare{int(rate)}", track_lag=False, edge_pid=bare.pid
                )

            bench.log("baseline: bare aiohttp + aiokafka server, step search")
            results["bare_server"] = await bench.search("bare", drive_bare, args.bare_start, args.reserve - 30)
            results["rss_bare_server"] = round((rss_mb(bare.pid) or (0.0, 0.0))[0], 1)
        finally:
            stop_process(bare)

    # Worker fold rate over backlogs appended straight to the log, each beside stock Faust; then the bare
    # consumer over everything, and Faust with no table over the first backlog.
    if bench.budget.left() > 35:
        calls = min(args.calls, int(max(0.0, bench.budget.left() - 30) * FOLD_CALLS_PER_S))
        await bench.fresh_service("the fold rate")
        svc = bench.service
        results["fold"] = await fold_rounds(bench, calls)
        results["rss_after_fold"] = snapshot_rss(svc)
        if calls < args.calls:
            results.setdefault("notes", []).append(
                f"fold phase: {calls} calls a round instead of the {args.calls} asked for, to fit the time budget"
            )
    results["bare_consumer"] = await bare_consumer(svc.settings.broker, svc.settings.topic("events"))
    bench.log(f"bare consumer: {results['bare_consumer']}")
    if "fold" in results:
        first_topic = results["fold"]["rounds"][0]["topic"]
        results["faust_floor"] = [await faust_floor(svc.settings, 0, first_topic)]
        bench.log(f"faust floor: {results['faust_floor'][-1]}")
        # The first round's backlog folded by the domain over aiokafka and RocksDB with no Faust; then the
        # domain alone over as many calls: the ceilings of a leaner adapter and of any adapter.
        results["lean_floor"] = await lean_floor(svc.settings, first_topic)
        bench.log(f"lean floor: {results['lean_floor']}")
        results["domain_floor"] = await domain_floor(len(bench.accounts), results["fold"]["append"]["calls"])
        bench.log(f"domain floor: {results['domain_floor']}")

    # Where the worker's CPU goes while it folds a backlog: what bounds the fold rate, drawn.
    if args.profile and "fold" in results and bench.budget.left() > 60:
        results.setdefault("profile", []).append(await profile_fold(bench, PROFILE_FOLD_CALLS))

    # Profile the edge and a worker at the sustainable turn rate, and on call.started at scenario (a)'s rate.
    if args.profile and bench.budget.left() > 2 * args.step_seconds + 50:
        results.setdefault("profile", []).extend(
            [
                await profile_run(bench, "calls", float(turns["sustainable"] or LADDER[0])),
                await profile_run(bench, "starts", float(args.start_rate)),
            ]
        )

    # call.started: sustainable rate, then 50% and 80% of it, if time allows.
    if bench.budget.left() > args.step_seconds + 55:
        await bench.fresh_service("the call.started search")
        svc = bench.service

        async def drive_starts(rate: float) -> dict[str, Any]:
            result = await bench.loadgen(svc.base_url, "starts", rate, args.step_seconds, f"starts{int(rate)}")
            await bench.settle()
            return result

        bench.log("call.started step search")
        starts = await bench.search("starts", drive_starts, args.start_search_from, args.step_seconds + 15)
        starts["fractions"] = {}
        if starts["sustainable"]:
            for fraction in (0.5, 0.8):
                if bench.budget.left() < args.step_seconds + 12:
                    break
                starts["fractions"][str(fraction)] = await drive_starts(max(1, round(starts["sustainable"] * fraction)))
        results["starts"] = starts

    # What bounds a long run on the memory broker: fetch cost against one partition's length.
    if args.broker == "memory" and bench.budget.left() > 30:
        results["partition_growth"] = await partition_growth(svc.settings.broker)
        bench.log(f"partition growth: {results['partition_growth']}")

    results["rss_end"] = snapshot_rss(svc)
    results["calls_driven"] = bench.calls_driven
    results["numbers_touched"] = min(bench.calls_driven, len(bench.accounts) * NUMBERS_PER_ACCOUNT)
    results["loadavg_end"] = loadavg()
    results["host_speed_end_s"] = host_speed_s()


async def fold_rate(bench: Bench, calls: int) -> dict[str, Any]:
    """Append `calls` calls with the worker paused, then time its committed positions as it folds them.

    Paused (SIGSTOP) while the backlog is appended, the worker then folds it with nothing else running, as
    the Faust floor folds its copy. The fold is done when the detector has folded the facts the events'
    folds appended too (on the decisions topic): the rate runs from the first commit inside the backlog to
    the commit that covers both (`fold_rates`), so the append and the worker's start-up do not count, and
    the CPU a record from the resumption to that commit."""
    await bench.settle()
    settings = bench.service.settings
    backlog_from = await bench.progress.ends()
    start = sum(backlog_from.values())
    facts_from = await bench.progress.end("decisions")
    worker = bench.service.processes()["worker"]
    os.kill(worker, signal.SIGSTOP)
    try:
        appended = await prefill(settings, bench.accounts, calls, offset=bench.calls_driven)
    finally:
        os.kill(worker, signal.SIGCONT)
    bench.calls_driven += calls
    end = await bench.progress.end()
    cpu_before, resumed = cpu_seconds(worker), time.monotonic()
    # A fresh service is generation 0: its worker's consumer group is the app id itself.
    steps, fact_steps, facts_end = await fold_steps(
        settings, settings.app_id, end, lambda: bench.progress.end("decisions"), max(5.0, bench.budget.left() - 30)
    )
    cpu_after = cpu_seconds(worker)
    folded = (steps[-1][1] - start) if steps else 0
    cpu = None if cpu_before is None or cpu_after is None or folded <= 0 else (cpu_after - cpu_before) / folded
    done = fold_done_at(steps, end, fact_steps, facts_end)
    return {
        "append": appended,
        "from_offsets": backlog_from,
        "records": end - start,
        "facts": None if facts_end is None else facts_end - facts_from,
        "commits": len([1 for _, position in steps if start < position < end]),
        "drained_s": None if done is None else round(done - resumed, 2),
        **fold_rates(steps, start, end, fact_steps, facts_end),
        "cpu_us_per_record": None if cpu is None else round(cpu * 1e6, 1),
    }


async def fold_rounds(bench: Bench, calls: int) -> dict[str, Any]:
    """`FOLD_ROUNDS` backlogs of `calls` calls, each folded by the worker and then by stock Faust with one
    table write a record (a copy of the same records on a topic of the round's own): the host's speed
    drifts from minute to minute, so each ratio is of neighbours in time, and the median decides."""
    settings = bench.service.settings
    rounds: list[dict[str, Any]] = []
    for number in range(1, FOLD_ROUNDS + 1):
        if rounds and bench.budget.left() < bench.args.reserve / 2:
            break
        bench.log(f"fold round {number}: appending {calls} calls straight to the events topic, the worker paused")
        fold = await fold_rate(bench, calls)
        topic = f"{FLOOR_TOPIC}.{number}"
        await create_topic(settings, topic, settings.partitions)
        await copy_records(settings, settings.topic("events"), fold["from_offsets"], topic)
        fold["topic"] = topic
        fold["faust"] = await faust_floor(settings, 1, topic)
        bench.log(f"fold round {number}: worker {fold['per_s']} records/s, stock Faust {fold['faust']}")
        rounds.append(fold)
    return fold_summary(rounds)


def fold_summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The rounds, the median worker rate, and the median of each round's ratio to stock Faust."""
    rates = [r["per_s"] for r in rounds if r.get("per_s")]
    ratios = [r["per_s"] / r["faust"]["per_s"] for r in rounds if r.get("per_s") and r["faust"].get("per_s")]
    return {
        "rounds": rounds,
        "append": rounds[0]["append"],
        "per_s": round(statistics.median(rates), 1) if rates else None,
        "stock_ratio": round(statistics.median(ratios), 2) if ratios else None,
    }


async def profile_run(bench: Bench, mode: str, rate: float) -> dict[str, Any]:
    """py-spy on the edge and the worker while `mode` traffic runs at `rate`: the top functions for the
    report, and a flame graph of each under bench/out/profiles/ (two samplers on each process)."""
    seconds = int(bench.args.step_seconds)
    procs = bench.service.processes()
    targets = {"edge": procs["edge (callscreen run)"], "worker": procs.get("worker", 0)}
    out: dict[str, Any] = {"mode": mode, "rate": rate, "seconds": seconds}
    if profile.py_spy() is None:
        out["error"] = NO_PY_SPY
        return out
    PROFILES.mkdir(parents=True, exist_ok=True)
    files = {name: bench.service.data_dir.parent / f"pyspy-{mode}-{name}.txt" for name in targets}
    graphs = {name: PROFILES / f"{mode}-{name}.svg" for name in targets}
    spies = [await profile.record(pid, seconds, files[name]) for name, pid in targets.items() if pid]
    spies += [await profile.record(pid, seconds, graphs[name], "flamegraph") for name, pid in targets.items() if pid]
    out["run"] = await bench.loadgen(bench.service.base_url, mode, rate, seconds, f"profile-{mode}{int(rate)}")
    for spy in spies:
        if spy is not None:
            await profile.finish(spy, 20)
    await bench.settle()
    out["top"] = {name: profile.top_functions(path) for name, path in files.items()}
    out["graphs"] = {name: graph_link(bench, path) for name, path in graphs.items() if path.exists()}
    return out


async def profile_fold(bench: Bench, calls: int) -> dict[str, Any]:
    """py-spy on the worker, samples holding the GIL only, while it folds `calls` calls appended straight to
    the events topic: its top functions, where its CPU goes (`profile.parts`), and a flame graph."""
    pid = bench.service.processes().get("worker", 0)
    out: dict[str, Any] = {"mode": "fold", "calls": calls}
    if profile.py_spy() is None:
        out["error"] = NO_PY_SPY
        return out
    await bench.settle()
    PROFILES.mkdir(parents=True, exist_ok=True)
    raw = bench.service.data_dir.parent / "pyspy-fold-worker.txt"
    graph = PROFILES / "fold-worker.svg"
    # Stopped once the backlog is folded; the duration only bounds a fold that never ends.
    limit_s = int(max(10.0, bench.budget.left() - 30))
    spies = [
        await profile.record(pid, limit_s, raw, gil=True),
        await profile.record(pid, limit_s, graph, "flamegraph", gil=True),
    ]
    started = time.monotonic()
    await prefill(bench.service.settings, bench.accounts, calls, offset=bench.calls_driven)
    bench.calls_driven += calls
    await bench.settle()
    out["seconds"] = round(time.monotonic() - started, 1)
    for spy in spies:
        if spy is not None:
            await profile.stop(spy, 20)
    out["top"] = {"worker": profile.top_functions(raw)}
    out["parts"] = profile.parts(raw)
    out["graphs"] = {"worker": graph_link(bench, graph)} if graph.exists() else {}
    return out


def graph_link(bench: Bench, graph: Path) -> str:
    """A flame graph's path as the report links it: relative to the report's own directory."""
    return os.path.relpath(graph, bench.args.out.parent)


def log_summary(paths: list[Path], keep: int = 8) -> dict[str, Any]:
    """Warnings and errors the services logged during the run (their stderr), counted by message."""
    counts: dict[str, int] = {}
    lines: list[str] = []
    for path in paths:
        with contextlib.suppress(OSError):
            lines += path.read_text(errors="replace").splitlines()
    for line in lines:
        if not any(word in line for word in ("WARNING", "ERROR", "Traceback", "CRITICAL", '"warning"', '"error"')):
            continue
        message = line[line.find("{") :] if "{" in line else line
        with contextlib.suppress(ValueError, AttributeError):
            record = json.loads(message)
            text = record.get("msg", record.get("message", ""))
            message = f"{record.get('role', '')} {record.get('level', '')} {record.get('logger', '')}: {text}"
            if record.get("error"):
                message += f" ({record['error']})"
        message = re.sub(r"\d+(\.\d+)?", "N", message)[:200]
        counts[message] = counts.get(message, 0) + 1
    top = sorted(counts.items(), key=lambda kv: -kv[1])[:keep]
    return {"lines": len(lines), "flagged": sum(counts.values()), "top": top}


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"cores": os.cpu_count(), "python": platform.python_version(), "kernel": platform.release()}
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["memory_gb"] = round(int(line.split()[1]) / 1024 / 1024, 1)
    with contextlib.suppress(subprocess.CalledProcessError, FileNotFoundError):
        info["commit"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    return info


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument("--accounts", type=int, default=800, help="guard accounts, 25 protected numbers each")
    parser.add_argument(
        "--calls",
        type=int,
        default=16000,
        help="calls a fold round appends: its backlog takes the worker some 8 s, a dozen commits or more to time it by",
    )
    parser.add_argument("--start-rate", type=float, default=200.0, help="scenario (a): call.started per second")
    parser.add_argument("--start-seconds", type=float, default=20.0, help="scenario (a): seconds of arrivals")
    parser.add_argument("--warmup-seconds", type=float, default=15.0, help="unmeasured call.started before (a)")
    parser.add_argument("--step-seconds", type=float, default=10.0, help="seconds of arrivals per search step")
    parser.add_argument("--turn-start", type=float, default=500, choices=LADDER, help="first rate of the turn search")
    parser.add_argument("--bare-start", type=float, default=3000, choices=LADDER, help="first rate of the bare search")
    parser.add_argument("--start-search-from", type=float, default=100, choices=LADDER)
    parser.add_argument("--close-rate", type=float, default=300.0, help="call.ended/s that close leftover calls")
    parser.add_argument("--budget", type=float, default=440.0, help="seconds for the whole run")
    parser.add_argument(
        "--reserve", type=float, default=90.0, help="seconds the searches leave for the baselines and fold phase"
    )
    parser.add_argument(
        "--profile", action="store_true", help="py-spy the edge and the worker on turns and on call.started"
    )
    parser.add_argument(
        "--broker", choices=BROKERS, default="kafka", help="the local Apache Kafka, or the in-memory Tansu"
    )
    parser.add_argument(
        "--out", type=Path, help="the report (default docs/benchmarks.md; bench/out/ with --profile or --broker memory)"
    )
    parser.add_argument("--json", type=Path, help="also write the raw results here (default: in the temp dir)")
    args = parser.parse_args(argv)
    args.out = args.out or default_out(args.broker, args.profile)
    args.json = args.json or Path(tempfile.gettempdir()) / f"callscreen-bench-{args.broker}.json"
    return args


def default_out(broker: str, profiled: bool = False) -> Path:
    """docs/benchmarks.md for a plain run on Kafka, the page of the manual; a profiled run's report or the
    memory broker's goes to bench/out/ (`profile.md`, `tansu.md`, `profile-tansu.md`)."""
    if not profiled:
        return ROOT / "docs" / "benchmarks.md" if broker == "kafka" else OUT / "tansu.md"
    return OUT / ("profile.md" if broker == "kafka" else "profile-tansu.md")


async def main_async(args: argparse.Namespace, budget: Budget, data_dir: Path) -> dict[str, Any]:
    results: dict[str, Any] = {"machine": machine(), "args": {k: str(v) for k, v in vars(args).items()}}
    results["ladder"] = LADDER
    results["date"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    results["broker"] = args.broker
    results["broker_label"] = broker_label(args.broker)
    service = await asyncio.to_thread(start_service, data_dir, broker=args.broker)
    bench: Bench | None = None
    try:
        results["startup_s"] = round(budget.elapsed(), 1)
        accounts = await create_accounts(service, args.accounts)
        print(f"[{budget.elapsed():6.1f}s] service up on {service.base_url}; {len(accounts)} accounts", file=sys.stderr)
        progress = Progress(service.settings)
        await progress.start()
        bench = Bench(args, budget, service, accounts, progress, results, log_paths=[service.log_path])
        results["rss_start"] = snapshot_rss(service)
        try:
            await phases(bench)
        finally:
            await bench.progress.stop()
    finally:
        if bench is not None:
            service = bench.service
        await asyncio.to_thread(service.stop)
        results["service_log"] = log_summary(bench.log_paths if bench is not None else [service.log_path])
    results["elapsed_s"] = round(budget.elapsed(), 1)
    return results


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    budget = Budget(args.budget + (PROFILE_S if args.profile else 0.0))
    with tempfile.TemporaryDirectory(prefix="callscreen-bench-") as tmp:
        results = asyncio.run(main_async(args, budget, Path(tmp) / "service"))
        args.json.write_text(json.dumps(results, indent=2, default=str))
        command = "python -m bench.run " + " ".join(argv if argv is not None else sys.argv[1:])
        args.out.parent.mkdir(parents=True, exist_ok=True)
        rendered = report.render(results, command.strip())
        previous = args.out.read_text() if args.out.exists() else ""
        for name in report.KEPT_SECTIONS:
            kept = report.section_of(previous, name)
            rendered = rendered if kept is None else report.with_section(rendered, name, kept)
        args.out.write_text(rendered)
    print(f"wrote {args.out} in {results['elapsed_s']}s", file=sys.stderr)


if __name__ == "__main__":
    main()
