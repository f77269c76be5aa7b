"""The carrier gate's own answer, beside `call.started`'s: `python -m bench.gate` (`make bench-gate`).

On one fresh service: `call.started` on `POST /v1/events` at the rate, then the gate's forms at the same
rate (half rejected, half challenged: answers that never leave Callscreen), each run open-loop in its own
process (bench/loadgen.py). The gate's overhead is its p99 less the start's; the target is 50 ms. The
section between the markers in docs/benchmarks.md is replaced; `make bench` keeps it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import report
from bench.loadgen import in_process
from bench.run import ROOT, machine
from bench.service import Service, create_accounts, start_service
from bench.traffic import BenchAccount
from callscreen.admin import Admin

TARGET_OVERHEAD_MS = 50.0
# Between runs, so one run's tail (the starts' closing ends) is folded before the next begins.
PAUSE_S = 3.0


async def gate_urls(service: Service, accounts: list[BenchAccount]) -> list[dict[str, str]]:
    """A gate token for every number of the accounts (no forward URL: these calls are never forwarded).
    Every number is gated so both runs spread their calls over the same numbers: a number's calls queue
    behind its earlier calls' facts, so fewer numbers would be a different load."""
    gates = []
    async with Admin(service.settings) as admin:
        for account in accounts:
            for number in account.numbers:
                token = (await admin.token_rotate(account.account_id, "gate", number))["token"]
                gates.append({"url": f"{service.base_url}/v1/gate/{token}", "number": number})
    return gates


async def measure(args: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    started = time.monotonic()
    service = await asyncio.to_thread(start_service, data_dir)
    try:
        accounts = await create_accounts(service, args.accounts)
        gates = await gate_urls(service, accounts)
        # The edge learns the tokens from the accounts topic; a moment is plenty, and a miss shows as 401s.
        await asyncio.sleep(2.0)
        common = {
            "base_url": service.base_url,
            "accounts": [a.to_json() for a in accounts],
            "rate": args.rate,
            "duration_s": args.seconds,
            "warmup_s": 1.0,
        }
        # Unmeasured first rounds: a number's first call registers it, and both paths warm up.
        warm = {**common, "duration_s": args.warmup}
        await in_process({**warm, "mode": "starts", "prefix": "ws", "seed": 5})
        await in_process({**warm, "mode": "gate", "prefix": "wg", "seed": 6, "gates": gates})
        rounds = []
        for n in range(args.rounds):
            # A p99 of a few hundred answers moves by tens of ms from run to run on a shared 2-core machine:
            # alternating rounds show the spread, and the verdict takes the median.
            await asyncio.sleep(PAUSE_S)
            offset = (n + 1) * len(gates)
            starts = await in_process(
                {**common, "mode": "starts", "prefix": f"s{n}", "seed": 10 + n, "call_offset": offset}
            )
            await asyncio.sleep(PAUSE_S)
            gate = await in_process({**common, "mode": "gate", "prefix": f"g{n}", "seed": 20 + n, "gates": gates})
            rounds.append({"starts": starts, "gate": gate})
    finally:
        await asyncio.to_thread(service.stop)
    return {
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "elapsed_s": round(time.monotonic() - started, 1),
        "warmup_s": args.warmup,
        "rate": args.rate,
        "seconds": args.seconds,
        "rounds": rounds,
    }


def overhead(gate: dict[str, Any], starts: dict[str, Any], kind: str) -> float | None:
    gate_p99, start_p99 = gate["by_type"].get(kind, {}).get("p99_ms"), starts["all"]["p99_ms"]
    return None if gate_p99 is None or start_p99 is None else round(gate_p99 - start_p99, 1)


def pair(stats: dict[str, Any]) -> str:
    return f"{report.ms(stats.get('p50_ms'))} / {report.ms(stats.get('p99_ms'))}"


def section(r: dict[str, Any], command: str) -> str:
    m = r["machine"]
    rows = [
        "| round | `call.started` p50 / p99 ms | `<Reject/>` p50 / p99 ms | challenge p50 / p99 ms "
        "| p99 over call.started's: reject, challenge | non-2xx / failed |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    extras: list[float] = []
    for n, run in enumerate(r["rounds"], 1):
        starts, gate = run["starts"], run["gate"]
        by_type = gate["by_type"]
        over = [overhead(gate, starts, kind) for kind in ("gate.reject", "gate.challenge")]
        extras += [x for x in over if x is not None]
        shown = ", ".join("—" if x is None else f"{x:+.1f}" for x in over)
        errors = starts["all"]["errors"] + gate["all"]["errors"]
        rows.append(
            f"| {n} | {pair(starts['all'])} | {pair(by_type.get('gate.reject', {}))} | "
            f"{pair(by_type.get('gate.challenge', {}))} | {shown} | {errors} |"
        )
    median = statistics.median(extras) if extras else None
    begin, end = report.markers("gate")
    verdict = (
        "not measured" if median is None else f"{median:+.1f} ms, {'met' if median <= TARGET_OVERHEAD_MS else 'missed'}"
    )
    return "\n".join(
        [
            begin,
            f"## The carrier gate at {r['rate']:g} calls/s",
            "",
            f"Written by `bench/gate.py` (`{command}`, {r['elapsed_s']} s) on {r['date']}, commit"
            f" {m.get('commit', '?')}, {m.get('cores')} cores, Python {m.get('python')}."
            f" One fresh service and the same numbers (every one gated); after {r['warmup_s']:g} s"
            f" of each unmeasured, rounds of `call.started` on the API for {r['seconds']:g} s, then the gate's"
            " forms for as long at the same rate, half rejected and half challenged (answers that never leave"
            " Callscreen). Latency from the intended send time.",
            "",
            *rows,
            "",
            f"The gate's overhead on the score's p99, median of the rounds: **{verdict}** (target"
            f" ≤ {TARGET_OVERHEAD_MS:g} ms).",
            "",
            end,
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.gate", description=__doc__)
    parser.add_argument("--rate", type=float, default=100.0, help="calls per second, for each of the two runs")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds of arrivals per run")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the two runs")
    parser.add_argument("--accounts", type=int, default=20, help="guard accounts, every number gated (25 each)")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds of unmeasured arrivals per path first")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="callscreen-bench-gate-") as tmp:
        results = asyncio.run(measure(args, Path(tmp) / "service"))
    command = "python -m bench.gate " + " ".join(argv if argv is not None else sys.argv[1:])
    document = args.out.read_text() if args.out.exists() else ""
    args.out.write_text(report.with_section(document, "gate", section(results, command.strip())))
    print(f"wrote the gate section of {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
