"""A platform's own webhooks beside native posts: `python -m bench.adapters`.

On one fresh service, in each round, two streams of full calls at the same rate for the same seconds, on
one load generator's clock and client (bench/loadgen.py, mode `adapter`), with the event mix of the main
bench's turn traffic: a start, 10-40 turns (roles alternating, `at` increasing on a plausible timeline), the
end, a call's events chained. The Vapi stream posts Vapi's own messages of each call (`status-update` in
progress, `speech-update` started / stopped for each turn, `end-of-call-report`), each signed as it leaves
with the account's Vapi secret (`x-timestamp`, `x-signature`), on `POST /v1/ingest/vapi/<ingest_token>`; the
native stream posts on `POST /v1/events` with a full key the bodies the Vapi parser makes of the same
messages, so the two differ only in their route: the token, the signature, the adapter's parse and its
answer. Half the accounts take each stream, so neither's calls queue behind the other's; the Vapi half has
its integration set (the secret sealed on the accounts topic, as `callscreen integration set` does).

The default, 250 requests/s each (500/s in all), is the full-call rate this 2-core machine sustains with
room (docs/benchmarks.md, the turn search); past it both streams queue and their difference is noise. The
adapter's extra p99 is its p99 over all its requests less the native one's in the same round; the verdict is
its median over the rounds, against a target of 2 ms. The section between the markers in docs/benchmarks.md
is replaced (`make bench` keeps it); the full results go to bench/out/adapters.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from bench import report
from bench.loadgen import ADAPTER, KINDS, NATIVE, STREAMS, in_process
from bench.run import OUT, ROOT, CpuShares, loadavg, machine
from bench.service import Progress, Service, create_accounts, start_service
from bench.traffic import BenchAccount, vapi_headers
from callscreen.admin import Admin

TARGET_EXTRA_MS = 2.0
PLATFORM = "vapi"
# The sustainability bar of the rest of the bench (bench/run.py): past it a stream is queueing.
P99_BAR_MS = 50.0
ROUTES = {NATIVE: "`/v1/events`", ADAPTER: "Vapi adapter"}
BENCHMARKS = ROOT / "docs" / "benchmarks.md"


async def set_integrations(service: Service, accounts: list[BenchAccount]) -> dict[str, dict[str, str]]:
    """A fresh ingest token and a Vapi secret for each account: what the load generator needs to sign and post."""
    ingest: dict[str, dict[str, str]] = {}
    async with Admin(service.settings) as admin:
        for account in accounts:
            token = (await admin.token_rotate(account.account_id, "ingest"))["token"]
            secret = secrets.token_urlsafe(24)
            await admin.integration_set(account.account_id, PLATFORM, secret)
            ingest[account.account_id] = {"token": token, "secret": secret}
    return ingest


async def until_signed_posts_taken(
    service: Service, ingest: dict[str, dict[str, str]], timeout_s: float = 30.0
) -> None:
    """Once the edge has folded the last tokens and integrations: a signed `status-update` it ignores (a call
    still queued) answers 200, not 401 (an unknown token) or 409 (no integration yet). No call is made."""
    body = orjson.dumps({"message": {"type": "status-update", "status": "queued"}})
    deadline = time.monotonic() + timeout_s
    async with aiohttp.ClientSession() as http:
        for found in (next(iter(ingest.values())), list(ingest.values())[-1]):
            while True:
                lines = vapi_headers(found["secret"], body, time.time()).decode().strip().split("\r\n")
                headers = dict(line.split(": ", 1) for line in lines)
                url = f"{service.base_url}/v1/ingest/{PLATFORM}/{found['token']}"
                async with http.post(url, data=body, headers=headers) as response:
                    if response.status == 200:
                        break
                    answer = await response.text()
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the edge did not take the signed posts: {response.status} {answer[:120]}")
                await asyncio.sleep(0.1)


async def pair(
    service: Service, progress: Progress, spec: dict[str, Any], drain_s: float, log: bool = True
) -> dict[str, Any]:
    """One run of both streams, with the workers' largest lag and each process's CPU over it, then the wait
    for the worker to fold what it left (its closing ends)."""
    max_lag = 0

    async def sample_lag() -> None:
        nonlocal max_lag
        while True:
            await asyncio.sleep(0.5)
            max_lag = max(max_lag, await progress.lag())

    sampler = asyncio.create_task(sample_lag())
    cpu = CpuShares(service)
    try:
        result = await in_process(spec)
    finally:
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler
    result["max_lag"] = max_lag
    result["cpu_pct"] = cpu.shares()
    waited = await progress.wait_drained(drain_s, slack=8)
    result["drained_s"] = None if waited == float("inf") else round(waited, 1)
    if log:
        shown = "; ".join(
            f"{stream} p50 {s.get('p50_ms')} p99 {s.get('p99_ms')} errors {s.get('errors')} of {s.get('count')}"
            for stream, s in ((stream, result["by_stream"].get(stream, {})) for stream in STREAMS)
        )
        print(
            f"{spec['prefix']}: {shown}; extra p99 {signed(extra(result, 'p99_ms'))}; max lag {max_lag}",
            file=sys.stderr,
            flush=True,
        )
    return result


async def measure(args: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    started, load_start = time.monotonic(), loadavg()
    service = await asyncio.to_thread(start_service, data_dir)
    try:
        accounts = await create_accounts(service, 2 * args.accounts)
        native, adapter = accounts[: args.accounts], accounts[args.accounts :]
        ingest = await set_integrations(service, adapter)
        await until_signed_posts_taken(service, ingest)
        progress = Progress(service.settings)
        await progress.start()
        try:
            common = {
                "base_url": service.base_url,
                "accounts": [a.to_json() for a in native],
                "adapter_accounts": [a.to_json() for a in adapter],
                "ingest": ingest,
                "mode": "adapter",
                "rate": args.rate,
                "duration_s": args.seconds,
                "warmup_s": 1.0,
                "close_rate": args.close_rate,
                "window_s": 1.0,  # both streams' statistics each second, in the JSON only: where a tail sat
            }
            # Unmeasured first: a fresh broker spends about twice the CPU while its JIT compiles (decision
            # 0033, the overload's warm-up), and both routes and the connection pool warm up.
            warm_spec = {**common, "duration_s": args.warmup, "warmup_s": 0.0, "prefix": "w", "seed": 5}
            warm = await pair(service, progress, warm_spec, 60)
            # Each round's calls take numbers after the ones earlier runs used, in both streams.
            offset = max(warm["calls"].values(), default=0)
            rounds = []
            for n in range(args.rounds):
                spec = {**common, "prefix": f"r{n}", "seed": 10 + n, "call_offset": offset}
                run = await pair(service, progress, spec, 60)
                offset += max(run["calls"].values(), default=0)
                rounds.append(run)
        finally:
            await progress.stop()
    finally:
        await asyncio.to_thread(service.stop)
    return {
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "elapsed_s": round(time.monotonic() - started, 1),
        "loadavg": [load_start, loadavg()],
        "accounts_per_stream": args.accounts,
        "warmup_s": args.warmup,
        "rate": args.rate,
        "seconds": args.seconds,
        "round_warmup_s": common["warmup_s"],
        "warmup": warm,
        "rounds": rounds,
    }


def kind_stats(run: dict[str, Any], stream: str, kind: str | None = None) -> dict[str, Any]:
    """One stream's statistics in a run: over all its requests, or over one kind (start, turn, end)."""
    if kind is None:
        found: dict[str, Any] = run["by_stream"].get(stream, {})
    else:
        found = run["by_type"].get(f"{stream} {kind}", {})
    return found


def extra(run: dict[str, Any], stat: str, kind: str | None = None) -> float | None:
    """The adapter's `stat` (p50_ms, p99_ms) less the native stream's in the same run, over all requests or
    over one kind."""
    mine, theirs = kind_stats(run, ADAPTER, kind).get(stat), kind_stats(run, NATIVE, kind).get(stat)
    return None if mine is None or theirs is None else round(mine - theirs, 2)


def pair_cell(stats: dict[str, Any]) -> str:
    return f"{report.ms(stats.get('p50_ms'))} / {report.ms(stats.get('p99_ms'))}"


def errors_cell(stats: dict[str, Any]) -> str:
    return f"{stats.get('errors', 0)} of {stats.get('count', 0)}"


def signed(value: float | None) -> str:
    return "—" if value is None else f"{value:+.1f}"


def median_extra(r: dict[str, Any], stat: str) -> float | None:
    extras = [x for x in (extra(run, stat) for run in r["rounds"]) if x is not None]
    return statistics.median(extras) if extras else None


def verdict(r: dict[str, Any]) -> tuple[float | None, str]:
    median = median_extra(r, "p99_ms")
    if median is None:
        return None, "not measured"
    return median, f"{median:+.1f} ms, {'met' if median <= TARGET_EXTRA_MS else 'missed'}"


def saturated(r: dict[str, Any]) -> bool:
    """Whether a stream queued in some round: a p99 past the bench's bar, or more than 1% errors."""
    for run in r["rounds"]:
        for stream in STREAMS:
            s = kind_stats(run, stream)
            p99 = s.get("p99_ms")
            if p99 is None or p99 >= P99_BAR_MS or s.get("errors", 0) > 0.01 * max(1, s.get("count", 0)):
                return True
    return False


def rate_reason(rate: float, found: float | None) -> str:
    """Why the rate is what it is, from the sustainable turn rate the last `make bench` found here."""
    total = 2 * rate
    if found is None:
        return (
            f" Together the streams offer {total:g} requests/s; the report here holds no sustainable turn rate"
            " to set it against."
        )
    return (
        f" Together the streams offer {total:g} requests/s, {100 * total / found:.0f}% of the {found:g}/s of full"
        " calls the last `make bench` sustained on this machine (the turn search above; the default, 250 + 250,"
        " is its 500/s step, passed with room): the two routes are compared below the point where the shared"
        " cores queue, and not, as at 500 + 500 `call.started`/s, far past the 200/s of starts it sustains."
    )


def section(r: dict[str, Any], command: str, found: float | None) -> str:
    m = r["machine"]
    rows = [
        "| round | `/v1/events` p50 / p99 ms | Vapi adapter p50 / p99 ms | adapter's extra p50, p99 ms "
        "| non-2xx / failed of measured: native, adapter | max worker lag | CPU % edge / worker / broker / load |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    kinds = [
        "| round | requests | `/v1/events` p50 / p99 ms | Vapi adapter p50 / p99 ms | adapter's extra p50, p99 ms "
        "| measured: native, adapter | non-2xx / failed: native, adapter |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for n, run in enumerate(r["rounds"], 1):
        native, adapter = kind_stats(run, NATIVE), kind_stats(run, ADAPTER)
        rows.append(
            f"| {n} | {pair_cell(native)} | {pair_cell(adapter)} | {signed(extra(run, 'p50_ms'))}, "
            f"{signed(extra(run, 'p99_ms'))} | {errors_cell(native)}, {errors_cell(adapter)} | {run['max_lag']} "
            f"| {report.cpu_cell(run.get('cpu_pct'))} |"
        )
        for kind in KINDS:
            mine, theirs = kind_stats(run, NATIVE, kind), kind_stats(run, ADAPTER, kind)
            kinds.append(
                f"| {n} | {kind} | {pair_cell(mine)} | {pair_cell(theirs)} | {signed(extra(run, 'p50_ms', kind))}, "
                f"{signed(extra(run, 'p99_ms', kind))} | {mine.get('count', 0)}, {theirs.get('count', 0)} "
                f"| {mine.get('errors', 0)}, {theirs.get('errors', 0)} |"
            )
    _, shown = verdict(r)
    p50 = median_extra(r, "p50_ms")
    begin, end = report.markers("adapters")
    lines = [
        begin,
        f"## A platform's webhooks beside `/v1/events`: full calls at {r['rate']:g} requests/s each",
        "",
        f"Written by `bench/adapters.py` (`{command}`, {r['elapsed_s']} s) on {r['date']}, commit"
        f" {m.get('commit', '?')}, {m.get('cores')} cores, Python {m.get('python')}."
        f" One fresh service; after {r['warmup_s']:g} s of both unmeasured (a fresh broker's JIT is still"
        " compiling: docs/decisions/0033-warm-up-before-the-overload.md), each round runs two streams of full"
        f" calls at {r['rate']:g} requests/s each for {r['seconds']:g} s, in one load generator on one clock,"
        " with the turn traffic's event mix and method (Method above: a start, 10–40 turns with roles"
        " alternating and `at` on a plausible timeline, the end; a call's events chained, latency from the"
        f" intended send time, the first {r.get('round_warmup_s', 1.0):g} s of a round not counted)."
        " The Vapi stream posts Vapi's own messages of each call on `POST /v1/ingest/vapi/<ingest_token>`,"
        " each signed as it leaves with the account's sealed secret (`x-timestamp`, `x-signature`):"
        " `status-update` in progress for the start, `speech-update` `started` / `stopped` (role `user` /"
        " `assistant`, Vapi's `turn`) for a turn's start and end, with an empty artifact (Vapi's carries the"
        " transcript so far), and `end-of-call-report` for the end. The native stream posts on"
        " `POST /v1/events`, with a full key, exactly the bodies the Vapi parser makes of the same messages."
        f" Each stream has {r['accounts_per_stream']} accounts of its own and its own arrivals, and both"
        " make the same calls in the same order, so the two differ only in their route: the token, the"
        " signature, the parse and the answer's wrapping. Calls still open when a round's arrivals stop are"
        " closed afterwards (each by its own route), unmeasured, and folded before the next round."
        + rate_reason(r["rate"], found)
        + " Both streams share the edge, so the adapter's CPU slows both: the difference is its route's own"
        f" latency. Load average at start / end: {' / '.join(r['loadavg'])} (other work on the machine makes"
        " the tails noisy).",
        "",
        *rows,
        "",
        "By kind of request:",
        "",
        *kinds,
        "",
        f"The adapter's extra p99 over all its requests, median of the rounds: **{shown}** (target ≤"
        f" {TARGET_EXTRA_MS:g} ms); its extra p50, median of the rounds: {signed(p50)} ms.",
    ]
    few = [
        kind_stats(run, stream, kind).get("count", 0)
        for run in r["rounds"]
        for stream in STREAMS
        for kind in ("start", "end")
    ]
    if few and min(few) < 200:
        lines += [
            "",
            f"A round measures {min(few)}–{max(few)} starts and as many ends a stream (a call is 22–82 requests"
            " spread over many seconds, and most calls open in the first second are still running when the"
            " round ends): their p99 is near their largest value, and the turns carry the verdict.",
        ]
    if saturated(r):
        lines += [
            "",
            f"A stream queued in at least one round (p99 ≥ {P99_BAR_MS:g} ms, or more than 1% errors): at"
            f" {2 * r['rate']:g} requests/s in all the service, or the machine it shares, was past what it"
            " sustains, and a difference of two queued tails says little about the adapter's own cost.",
        ]
    return "\n".join([*lines, "", end])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.adapters", description=__doc__)
    parser.add_argument("--rate", type=float, default=250.0, help="requests per second, for each of the two streams")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds of arrivals per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the two streams side by side")
    parser.add_argument("--accounts", type=int, default=100, help="guard accounts per stream (25 numbers each)")
    parser.add_argument("--warmup", type=float, default=15.0, help="seconds of unmeasured arrivals of both first")
    parser.add_argument("--close-rate", type=float, default=1000.0, help="ends a second that close a round's calls")
    parser.add_argument("--out", type=Path, default=BENCHMARKS)
    parser.add_argument("--json", type=Path, default=OUT / "adapters.json", help="the full results")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="callscreen-bench-adapters-") as tmp:
        results = asyncio.run(measure(args, Path(tmp) / "service"))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2, default=str))
    command = "python -m bench.adapters " + " ".join(argv if argv is not None else sys.argv[1:])
    found = report.turn_rate_found(BENCHMARKS.read_text()) if BENCHMARKS.exists() else None
    document = args.out.read_text() if args.out.exists() else ""
    args.out.write_text(report.with_section(document, "adapters", section(results, command.strip(), found)))
    _, shown = verdict(results)
    print(f"adapter's extra p99: {shown}; wrote the adapters section of {args.out} and {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
