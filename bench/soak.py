"""`python -m bench.soak`: a long run at half the sustainable mixed rate, and recovery from an overload.

soak      `--minutes` (10) of full calls (start, turns, end) at half `--sustainable`, by default the
          turn-traffic rate the last `make bench` found (docs/benchmarks.md): p99 per minute, the worker's
          lag (sampled every 2 s) and each process's RSS per minute. It starts on a store that already
          holds `--prefill` calls (`bench/prefill.py`), folded before the first minute: a running
          service has state, and its RocksDB cache is full of it. On an empty store the cache fills
          during the soak, towards its fixed budget, and that growth says nothing about a leak.
overload  twice `--sustainable` for 60 s, then half of it for 60 s: p99 and each process's CPU per 5 s,
          the seconds from the drop until p99 stays under 50 ms, and a check through
          `GET /v1/calls/{call_id}` that every call whose start was acknowledged has every acknowledged
          turn and end in its record.

Writes bench/out/soak.md with soak.png and overload.png beside it (drawn with matplotlib); the latest
verdicts are copied into docs/benchmarks.md, "Memory, soak and overload".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.loadgen import in_process
from bench.memory import rocksdb_mb
from bench.prefill import prefill
from bench.report import turn_rate_found
from bench.run import OUT, P99_TARGET_MS, ROOT, CpuShares, loadavg, machine, snapshot_rss
from bench.service import Progress, Service, create_accounts, start_service
from bench.soak_report import draw_overload, draw_soak, render
from bench.traffic import BenchAccount
from infra.ports import free_port_block

OVERLOAD_STEP_S = 60.0
OVERLOAD_WINDOW_S = 5.0
# Unmeasured full calls at the low rate before the overload: a fresh broker's first seconds cost it two to three
# times the CPU of the same load later, which put timeouts into the overload's first windows
# (docs/decisions/0033-warm-up-before-the-overload.md).
OVERLOAD_WARMUP_S = 15.0
RECOVERY_TARGET_S = 30.0
# Two calls for each of the 20,000 protected numbers of the default 800 accounts.
PREFILL_CALLS = 40_000
BENCHMARKS = ROOT / "docs" / "benchmarks.md"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def spec(service: Service, accounts: list[BenchAccount], prefix: str, **fields: Any) -> dict[str, Any]:
    return {
        "base_url": service.base_url,
        "accounts": [a.to_json() for a in accounts],
        "mode": "calls",
        "prefix": prefix,
        "seed": len(prefix),
        "warmup_s": 0.0,
        "close_rate": 300.0,
    } | fields


async def sample(service: Service, progress: Progress, every_s: float, rss_every_s: float) -> dict[str, list[Any]]:
    """Lag and each process's CPU every `every_s`, and RSS and the worker's RocksDB cache every `rss_every_s`,
    until cancelled: [(seconds, value)] lists."""
    started = time.monotonic()
    taken: dict[str, list[Any]] = {"lag": [], "cpu": [], "rss": []}
    next_rss = 0.0
    cpu = CpuShares(service)
    with contextlib.suppress(asyncio.CancelledError):
        while True:
            now = time.monotonic() - started
            taken["lag"].append((round(now, 1), await progress.lag()))
            # Each process's share since the last sample: which process a slow window coincided with.
            taken["cpu"].append((round(now, 1), cpu.lap()))
            if now >= next_rss:
                snapshot = await asyncio.to_thread(snapshot_rss, service)
                # The worker's shared RocksDB cache fills up to its budget: growth that is bounded by design.
                snapshot["rocksdb_mb"] = await rocksdb_mb(service.settings.metrics_port)
                taken["rss"].append((round(now, 1), snapshot))
                next_rss += rss_every_s
            await asyncio.sleep(every_s)
    return taken


async def while_sampling(
    service: Service, progress: Progress, load: dict[str, Any], every_s: float, rss_every_s: float
) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    sampler = asyncio.create_task(sample(service, progress, every_s, rss_every_s))
    try:
        result = await in_process(load)
    finally:
        sampler.cancel()
    return result, await sampler


async def filled(service: Service, progress: Progress, accounts: list[BenchAccount], calls: int) -> dict[str, Any]:
    """`calls` calls appended and folded before the soak: the store, and the worker, as a running service has them."""
    log(f"soak: prefilling {calls} calls")
    appended = await prefill(service.settings, accounts, calls)
    drained = await progress.wait_drained(600.0, slack=8)
    if drained == float("inf"):
        raise SystemExit(f"the worker did not fold the {calls} prefilled calls within 600 s")
    return appended | {
        "drained_s": round(drained, 1),
        "rss": await asyncio.to_thread(snapshot_rss, service),
        "rocksdb_mb": await rocksdb_mb(service.settings.metrics_port),
    }


async def soak(service: Service, progress: Progress, accounts: list[BenchAccount], args: argparse.Namespace) -> Any:
    rate = args.sustainable / 2
    before = await filled(service, progress, accounts, args.prefill) if args.prefill else None
    seconds = args.minutes * 60.0
    log(f"soak: full calls at {rate:g} events/s for {seconds:g} s")
    load = spec(service, accounts, "soak", rate=rate, duration_s=seconds, window_s=60.0)
    result, samples = await while_sampling(service, progress, load, 2.0, 60.0)
    result["drained_s"] = await progress.wait_drained(60.0, slack=8)
    return {"rate": rate, "seconds": seconds, "prefill": before, "result": result, "samples": samples}


async def overload(service: Service, progress: Progress, accounts: list[BenchAccount], args: argparse.Namespace) -> Any:
    high, low = args.sustainable * 2, args.sustainable / 2
    log(f"overload: {high:g} events/s for {OVERLOAD_STEP_S:g} s, then {low:g} events/s")
    steps = [(high, OVERLOAD_STEP_S), (low, OVERLOAD_STEP_S)]
    log(f"overload: warm-up at {low:g} events/s for {OVERLOAD_WARMUP_S:g} s, not measured")
    warm = spec(
        service,
        accounts,
        "warm",
        rate=low,
        duration_s=OVERLOAD_WARMUP_S,
        window_s=OVERLOAD_WINDOW_S,
        call_offset=2_000_000,
    )
    warmup = await in_process(warm)
    await progress.wait_drained(60.0, slack=8)
    load = spec(
        service,
        accounts,
        "over",
        rate=high,
        rates=steps,
        duration_s=2 * OVERLOAD_STEP_S,
        window_s=OVERLOAD_WINDOW_S,
        ledger=True,
        call_offset=1_000_000,
    )
    result, samples = await while_sampling(service, progress, load, 1.0, 10.0)
    ledger = result.pop("ledger")
    drained = await progress.wait_drained(180.0, slack=8)
    log(f"overload: drained {drained:.1f} s after the load; checking {len(ledger)} calls")
    return {
        "steps": steps,
        "warmup": {
            "rate": low,
            "seconds": OVERLOAD_WARMUP_S,
            "all": warmup["all"],
            "windows": warmup["windows"],
        },
        "result": result,
        "samples": samples,
        "drained_s": drained,
        "recovered_s": recovered_after(result["windows"], OVERLOAD_STEP_S),
        "lost": await lost_events(service.base_url, ledger),
    }


def recovered_after(windows: list[dict[str, Any]], drop_s: float) -> float | None:
    """Seconds from the drop to the start of the first window from which every p99 is under target."""
    after = [w for w in windows if w["start_s"] >= drop_s]
    for i, window in enumerate(after):
        if all(w["p99_ms"] is not None and w["p99_ms"] < P99_TARGET_MS for w in after[i:]):
            return float(window["start_s"] - drop_s)
    return None


async def lost_events(base_url: str, ledger: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every call with an acknowledged start: readable, with at least its acknowledged turns, and ended if
    its end was acknowledged."""
    checked = 0
    missing: list[str] = []
    semaphore = asyncio.Semaphore(32)

    async def check(http: aiohttp.ClientSession, call_id: str, entry: dict[str, Any]) -> None:
        nonlocal checked
        acks = entry["acks"]
        if not acks.get("call.started"):
            return
        headers = {"Authorization": f"Bearer {entry['key']}"}
        async with semaphore:
            for _ in range(20):
                async with http.get(f"{base_url}/v1/calls/{call_id}", headers=headers) as response:
                    if response.status == 429:
                        await asyncio.sleep(float(response.headers.get("Retry-After", "1")))
                        continue
                    record = await response.json() if response.status == 200 else None
                    break
            else:
                record = None
        checked += 1
        turns = 0 if record is None else int(record["user_turns"]) + int(record["agent_turns"])
        if record is None:
            missing.append(f"{call_id}: no record")
        elif turns < acks.get("turn.started", 0):
            missing.append(f"{call_id}: {turns} turns of {acks['turn.started']} acknowledged")
        elif acks.get("call.ended") and record["state"] != "ended":
            missing.append(f"{call_id}: end acknowledged, state {record['state']}")

    async with aiohttp.ClientSession() as http:
        await asyncio.gather(*(check(http, call_id, entry) for call_id, entry in ledger.items()))
    acknowledged = sum(sum(entry["acks"].values()) for entry in ledger.values())
    return {"calls": checked, "acknowledged_events": acknowledged, "missing": len(missing), "examples": missing[:5]}


async def measure(args: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    results: dict[str, Any] = {"machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    results["sustainable"] = args.sustainable
    service = await asyncio.to_thread(start_service, data_dir)
    try:
        accounts = await create_accounts(service, args.accounts)
        progress = Progress(service.settings)
        await progress.start()
        try:
            results["loadavg_start"] = loadavg()
            if args.phase in ("soak", "both"):
                results["soak"] = await soak(service, progress, accounts, args)
            if args.phase in ("overload", "both"):
                results["overload"] = await overload(service, progress, accounts, args)
            results["loadavg_end"] = loadavg()
        finally:
            await progress.stop()
    finally:
        await asyncio.to_thread(service.stop)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    parser.add_argument("--phase", choices=("soak", "overload", "both"), default="both")
    parser.add_argument(
        "--sustainable",
        type=float,
        default=None,
        help="the sustainable turn-traffic rate (default: the one docs/benchmarks.md found)",
    )
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the soak")
    parser.add_argument("--accounts", type=int, default=800, help="guard accounts, 25 protected numbers each")
    parser.add_argument(
        "--prefill", type=int, default=PREFILL_CALLS, help="calls in the store before the soak starts (0: empty)"
    )
    parser.add_argument("--out", type=Path, default=OUT / "soak.md")
    args = parser.parse_args(argv)
    if args.sustainable is None:
        # The rate this machine sustains now, not a constant from another machine or another week.
        found = turn_rate_found(BENCHMARKS.read_text()) if BENCHMARKS.exists() else None
        if found is None:
            parser.error(f"{BENCHMARKS} names no sustainable turn rate: run `make bench` or pass --sustainable")
        args.sustainable = found
    # The worker serves Prometheus here: its RocksDB cache is read with every RSS sample.
    os.environ["CALLSCREEN_METRICS_PORT"] = str(free_port_block(2))
    with tempfile.TemporaryDirectory(prefix="callscreen-soak-") as tmp:
        results = asyncio.run(measure(args, Path(tmp) / "service"))
    raw = Path(tempfile.gettempdir()) / "callscreen-soak.json"
    raw.write_text(json.dumps(results, indent=2, default=str))
    command = "python -m bench.soak " + " ".join(argv if argv is not None else sys.argv[1:])
    previous = args.out.read_text() if args.out.exists() else ""
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if "soak" in results:
        draw_soak(results["soak"], args.out.parent / "soak.png")
    if "overload" in results:
        draw_overload(results["overload"], args.out.parent / "overload.png")
    args.out.write_text(render(results, command.strip(), previous))
    log(f"wrote {args.out} (raw results in {raw})")


if __name__ == "__main__":
    main()
