"""Time to ready after a worker's SIGKILL, by how many calls its tables hold: `python -m bench.crash`
(`make bench-crash`).

One service; for each size in turn (default 20,000, then 100,000 calls in all): calls appended straight to
the events topic until the tables hold that many (bench/prefill.py) and folded; a few seconds of live
starts; then the worker SIGKILLed (the launcher starts it again on the same data dir). From the kill on,
every `PROBE_S` one `call.started` on `POST /v1/events` and one carrier form on a gated number (the caller
is the called number, so a scored form is rejected): the seconds to the first scored start, to `/healthz`
200, and what the gate answered meanwhile (the number keeps the default `unavailable` choice, forward;
it has no forward URL, so a forward answers the short apology). The figures go to `bench/out/crash.json`;
`docs/hostile-runs.md` has the latest ones.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp

from bench.gate import gate_urls
from bench.loadgen import gate_form
from bench.prefill import prefill
from bench.run import ROOT, machine
from bench.service import Progress, Service, create_accounts, start_service
from bench.traffic import BenchAccount, call_started
from infra.clock import now_ms

PROBE_S = 0.05
READY_TIMEOUT_S = 300.0
FOLD_TIMEOUT_S = 900.0
OUT = ROOT / "bench" / "out" / "crash.json"


def worker_pid(service: Service) -> int:
    pids = [pid for role, pid in service.processes().items() if role.startswith("worker")]
    assert len(pids) == 1, f"one worker expected: {pids}"
    return pids[0]


def gate_answer(body: str) -> str:
    """What a gate answer did: the scored reject, the unavailable forward's apology, or something else."""
    if "<Reject" in body:
        return "scored (reject)"
    if "<Hangup" in body:
        return "unavailable (forward: apology)"
    return body[:60]


async def kill_and_probe(
    service: Service, http: aiohttp.ClientSession, account: BenchAccount, gate: dict[str, str], round_: int
) -> dict[str, Any]:
    """SIGKILL the worker, then probe until a start is scored and /healthz answers 200."""
    headers = {"Authorization": f"Bearer {account.key}"}
    os.kill(worker_pid(service), signal.SIGKILL)
    killed = time.monotonic()
    starts: Counter[int] = Counter()
    gates: Counter[str] = Counter()
    first_scored = healthy = None
    n = 0
    while (first_scored is None or healthy is None) and time.monotonic() - killed < READY_TIMEOUT_S:
        n += 1
        body = call_started(f"crash-{round_}-{n}", account.numbers[1], f"+1415555{n % 10_000:04d}", now_ms())
        async with http.post(f"{service.base_url}/v1/events", json=body, headers=headers) as r:
            starts[r.status] += 1
            if r.status == 200 and first_scored is None:
                first_scored = time.monotonic() - killed
        form = gate_form(f"CAcrash{round_}x{n:08d}", gate["number"], gate["number"], "TN-Validation-Failed-A")
        async with http.post(gate["url"], data=form) as r:
            gates[gate_answer(await r.text())] += 1
        async with http.get(f"{service.base_url}/healthz") as r:
            if r.status == 200 and healthy is None and first_scored is not None:
                healthy = time.monotonic() - killed
        await asyncio.sleep(PROBE_S)
    return {
        "first_scored_start_s": None if first_scored is None else round(first_scored, 2),
        "healthz_200_s": None if healthy is None else round(healthy, 2),
        "starts_by_status": dict(starts),
        "gate_answers": dict(gates),
    }


async def measure(args: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    service = await asyncio.to_thread(start_service, data_dir)
    rounds = []
    try:
        accounts = await create_accounts(service, args.accounts)
        gate = next(g for g in await gate_urls(service, accounts[:1]) if g["number"] == accounts[0].numbers[0])
        progress = Progress(service.settings)
        await progress.start()
        held = 0
        try:
            async with aiohttp.ClientSession() as http:
                for round_, size in enumerate(args.sizes):
                    appended = await prefill(service.settings, accounts, size - held, offset=held)
                    held = size
                    fold_s = await progress.wait_drained(FOLD_TIMEOUT_S)
                    # Live starts after the backlog, so the kill lands on a worker folding as usual.
                    for n in range(50):
                        body = call_started(f"live-{round_}-{n}", accounts[0].numbers[2], f"+1415666{n:04d}", now_ms())
                        headers = {"Authorization": f"Bearer {accounts[0].key}"}
                        async with http.post(f"{service.base_url}/v1/events", json=body, headers=headers) as r:
                            assert r.status == 200, (r.status, await r.text())
                    probe = await kill_and_probe(service, http, accounts[0], gate, round_)
                    rounds.append({"calls_in_tables": size, "prefill": appended, "fold_s": round(fold_s, 1), **probe})
                    print(json.dumps(rounds[-1]), flush=True)
        finally:
            await progress.stop()
    finally:
        await asyncio.to_thread(service.stop)
    return {"machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "rounds": rounds}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.crash", description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000, 100_000], help="calls in the tables")
    parser.add_argument("--accounts", type=int, default=40, help="guard accounts, 25 protected numbers each")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-crash-") as tmp:
        result = asyncio.run(measure(args, Path(tmp) / "data"))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(f"report: {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
