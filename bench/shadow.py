"""`python -m bench.shadow` (`make bench-shadow`): live `call.started` p99 at 200/s with no shadow run, then
while a shadow run reads the log of `--calls` prefilled calls (100,000 by default), and the run's own rate;
writes bench/out/shadow.json and prints its table (docs/benchmarks.md, "Shadow runs").

The calls (start and end) are appended straight to the events topic (`bench/prefill.py`) and folded by
the worker, and an unmeasured `--warmup` of the same load runs, before anything is measured. Each load
phase is the open-loop generator of `bench/run.py` in its own process (starts at `--rate` for
`--seconds`). The run is asked for as soon as the second phase's arrivals begin, over a window holding
every prefilled call of one account; its rate is the log's calls (prefilled and those of the phases so
far) over the seconds from its request to its `done`. The shadow role reads the whole log whatever the
window, so its cost is that of the log, not of one account's calls.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from bench import report
from bench.prefill import prefill
from bench.run import OUT, ROOT, Bench, Budget, CpuShares, loadavg, machine
from bench.service import Progress, create_accounts, start_service
from domain.rules import DAY_MS, HOUR_MS
from domain.times import format_ms
from infra.clock import now_ms

RATE = 200.0
CALLS = 100_000


async def run_until_done(base_url: str, key: str, since: int, timeout_s: float) -> dict[str, Any]:
    """Ask for a run with a lower reject threshold and poll it to its end; its seconds and last progress."""
    headers = {"Authorization": f"Bearer {key}"}
    body = {
        "since": format_ms(since),
        "until": format_ms(now_ms() + HOUR_MS),
        "policy": {"thresholds": {"reject": 0.6}},
    }
    started = time.monotonic()
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{base_url}/v1/shadow", json=body, headers=headers) as r:
            assert r.status == 202, await r.text()
            run_id = (await r.json())["id"]
        while time.monotonic() - started < timeout_s:
            async with http.get(f"{base_url}/v1/shadow/{run_id}", headers=headers) as r:
                shown = await r.json()
            if shown["state"] == "done":
                return {"id": run_id, "seconds": round(time.monotonic() - started, 2), "calls": shown["calls"]}
            await asyncio.sleep(0.25)
    raise TimeoutError(f"shadow run {run_id} not done within {timeout_s:.0f} s")


async def measure(args: argparse.Namespace, bench: Bench) -> dict[str, Any]:
    service = bench.service
    prefilled_at = now_ms()
    filled = await prefill(service.settings, bench.accounts, args.calls)
    bench.log(f"prefilled {filled}")
    folded = await bench.progress.wait_drained(args.drain_timeout, slack=8)
    bench.log(f"the worker folded the prefill in {folded:.1f} s after its last append")
    # Unmeasured: after a backlog the worker still flushes and compacts, and a fresh JVM still compiles.
    warm = await bench.loadgen(service.base_url, "starts", args.rate, args.warmup, "warm")
    quiet = await bench.loadgen(service.base_url, "starts", args.rate, args.seconds, "quiet")

    calls_in_log = args.calls + int(warm.get("calls", 0)) + int(quiet.get("calls", 0))
    cpu = CpuShares(service)
    load = asyncio.create_task(bench.loadgen(service.base_url, "starts", args.rate, args.seconds, "shadowed"))
    # The generator's arrivals start about a second after it is launched.
    await asyncio.sleep(1.0)
    account = bench.accounts[0]
    run = await run_until_done(service.base_url, account.key, prefilled_at - DAY_MS, args.run_timeout)
    run_cpu = cpu.shares()
    shadowed = await load
    run["log_calls"] = calls_in_log + round(args.rate * min(run["seconds"], args.seconds))
    run["log_calls_per_s"] = round(run["log_calls"] / run["seconds"], 1)
    run["cpu_pct"] = run_cpu
    run["overlap"] = round(min(1.0, run["seconds"] / args.seconds), 2)
    bench.log(f"shadow run: {run}")
    return {
        "prefill": filled,
        "fold_s": round(folded, 1),
        "cpu_share": service.settings.shadow_cpu_share,
        "warm": warm,
        "quiet": quiet,
        "shadowed": shadowed,
        "run": run,
    }


def table(result: dict[str, Any]) -> str:
    def row(name: str, phase: dict[str, Any]) -> str:
        s = phase["all"]
        return (
            f"| {name} | {phase['throughput_ok_per_s']} | {s['p50_ms']} | {s['p99_ms']} | {s['p999_ms']} | "
            f"{s['errors']} | {phase['cpu_pct'].get('shadow', '—')} |"
        )

    run = result["run"]
    quiet, shadowed = result["quiet"]["all"]["p99_ms"], result["shadowed"]["all"]["p99_ms"]
    ratio = "not measured" if not quiet or shadowed is None else f"{shadowed / quiet:.2f}×"
    return "\n".join(
        [
            "| phase | ok /s | p50 ms | p99 ms | p99.9 ms | errors | shadow role CPU % |",
            "|---|---:|---:|---:|---:|---:|---:|",
            row("no shadow run", result["quiet"]),
            row("a shadow run reading the log", result["shadowed"]),
            "",
            f"Shadow run: {run['log_calls']:,} calls in the log read in {run['seconds']} s, "
            f"{run['log_calls_per_s']:,} calls/s ({run['calls']} of the account's calls compared); it ran for "
            f"{run['overlap'] * 100:.0f}% of the loaded phase. CPU over the run, % of a core: {run['cpu_pct']}.",
            "",
            f"Live `call.started` p99 during the run over without it: **{ratio}** (the p99 of one phase on two"
            " shared cores moves by more than that between runs: read it as kept, or not, not as a figure).",
        ]
    )


def section(result: dict[str, Any]) -> str:
    """The "Shadow runs" section of docs/benchmarks.md, from one run's results."""
    m = result["machine"]
    begin, end = report.markers("shadow")
    return "\n".join(
        [
            begin,
            "## Shadow runs: live `call.started` beside a run reading the log",
            "",
            f"Written by `bench/shadow.py` (`{result['command'].strip()}`) on {result['date']}, commit"
            f" {m.get('commit', '?')}, {m.get('cores')} cores, Python {m.get('python')}; load average at start"
            f" / end {result['loadavg_start']} / {result['loadavg_end']}. {result['prefill']['calls']:,} calls"
            f" (start and end) prefilled into the log and folded ({result['fold_s']} s after the last append),"
            " an unmeasured warm-up of the same load, then `call.started` at"
            f" {result['quiet']['rate']:g}/s for {result['quiet']['duration_s']:g} s with no run, and again while a"
            " shadow run (a lower reject threshold, one account's window holding its prefilled calls) reads the"
            f" whole log; the role holds a run to {result['cpu_share']:g} of a core (`shadow_cpu_share`) at a"
            " lower CPU priority than the workers. Latency from the intended send time.",
            "",
            table(result),
            "",
            end,
        ]
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.shadow", description=__doc__)
    parser.add_argument("--calls", type=int, default=CALLS, help="calls prefilled into the log")
    parser.add_argument("--rate", type=float, default=RATE, help="live starts per second")
    parser.add_argument("--seconds", type=float, default=30.0, help="seconds of each load phase")
    parser.add_argument("--warmup", type=float, default=30.0, help="unmeasured seconds of load before the phases")
    parser.add_argument("--accounts", type=int, default=40, help="guard accounts, 25 protected numbers each")
    parser.add_argument("--drain-timeout", type=float, default=300.0, help="seconds the worker gets for the prefill")
    parser.add_argument("--run-timeout", type=float, default=600.0, help="seconds the shadow run gets")
    parser.add_argument("--close-rate", type=float, default=400.0, help="ends per second after each phase")
    parser.add_argument("--out", type=Path, default=OUT / "shadow.json")
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "benchmarks.md", help="where its section goes")
    return parser.parse_args(argv)


async def main_async(args: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    service = await asyncio.to_thread(start_service, data_dir)
    try:
        accounts = await create_accounts(service, args.accounts)
        progress = Progress(service.settings)
        await progress.start()
        bench = Bench(
            args=args, service=service, accounts=accounts, budget=Budget(3600.0), progress=progress, results={}
        )
        try:
            return await measure(args, bench)
        finally:
            await progress.stop()
    finally:
        await asyncio.to_thread(service.stop)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    results: dict[str, Any] = {"machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    results["loadavg_start"] = loadavg()
    with tempfile.TemporaryDirectory(prefix="callscreen-shadow-") as tmp:
        results.update(asyncio.run(main_async(args, Path(tmp) / "service")))
    results["loadavg_end"] = loadavg()
    results["command"] = "python -m bench.shadow " + " ".join(argv if argv is not None else sys.argv[1:])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    document = args.doc.read_text() if args.doc.exists() else ""
    args.doc.write_text(report.with_section(document, "shadow", section(results)))
    print(table(results))
    print(f"wrote {args.out} and the shadow section of {args.doc}", file=sys.stderr)


if __name__ == "__main__":
    main()
