"""Render the results of `bench.run` as docs/benchmarks.md."""

from __future__ import annotations

import re
from typing import Any

# The carrier gate's section of docs/benchmarks.md is written by bench/gate.py, the platform adapters' by
# bench/adapters.py, the shadow runs' by bench/shadow.py; bench.run carries them over (`KEPT_SECTIONS`).
TURNS_HEADING = "## (b) Turn traffic (full calls): sustainable rate"
TARGETS_NOTE = "Targets are the issue's; a miss is reported as measured, the service was not tuned for this run."


def ms(value: Any, places: int = 1) -> str:
    return "—" if value is None else f"{value:.{places}f}"


def run_row(result: dict[str, Any], label: str = "") -> str:
    s = result["all"]
    statuses = ", ".join(f"{k}×{v}" for k, v in sorted(s["statuses"].items()) if not k.startswith("2"))
    unfinished = result.get("unfinished", 0)
    if unfinished:
        statuses = ", ".join(x for x in (statuses, f"unanswered×{unfinished}") if x)
    lag = result.get("max_lag")
    name = label or f"{result['rate']:g}"
    errors = f"{s['errors']} ({statuses})" if statuses else str(s["errors"])
    return (
        f"| {name} | {result['offered']} / {s['count']} | {result['throughput_ok_per_s']:g} | {ms(s['p50_ms'])} | "
        f"{ms(s['p99_ms'])} | {ms(s['p999_ms'])} | {ms(s['max_ms'])} | {errors} "
        f"| {'—' if lag is None else lag} | {cpu_cell(result.get('cpu_pct'))} |"
    )


CPU_ROLES = ("edge", "worker", "broker", "load")


def cpu_cell(shares: dict[str, float] | None) -> str:
    """Edge / worker / broker / load generator, percent of one core each, and their sum out of 200 on 2 cores."""
    if not shares:
        return "—"
    parts = [f"{shares[role]:.0f}" if role in shares else "—" for role in CPU_ROLES]
    return f"{' / '.join(parts)} (Σ {sum(shares.values()):.0f})"


RUN_HEADER = (
    "| offered /s | requests offered / measured | 2xx /s | p50 ms | p99 ms | p99.9 ms | max ms | non-2xx / failed "
    "| max worker lag | CPU % edge / worker / broker / load |\n"
    "|---:|---:|---:|---:|---:|---:|---:|---|---:|---|"
)


def search_table(search: dict[str, Any] | None) -> list[str]:
    if not search:
        return ["_Not run (time budget)._", ""]
    lines = [RUN_HEADER]
    for step in search["steps"]:
        lines.append(run_row(step))
    lines.append("")
    best = search["sustainable"]
    verdict = f"**sustainable: {best:g} /s**" if best else "**sustainable: below the lowest step tried**"
    if not search.get("complete"):
        verdict += " (search cut short by the time budget: a bound, not the edge)"
    elif search.get("topped"):
        verdict += " (the ladder's top: the rate may be higher)"
    lines += [verdict, ""]
    fractions = search.get("fractions") or {}
    if fractions:
        lines += ["Fractions of the sustainable rate:", "", RUN_HEADER]
        for fraction, step in sorted(fractions.items()):
            lines.append(run_row(step, f"{step['rate']:g} ({float(fraction):.0%})"))
        if best:
            top = next((s for s in search["steps"] if s["rate"] == best), None)
            if top:
                lines.append(run_row(top, f"{best:g} (100%)"))
        lines.append("")
    return lines


def by_type_table(result: dict[str, Any]) -> list[str]:
    lines = ["| event type | count | p50 ms | p99 ms | p99.9 ms | non-2xx |", "|---|---:|---:|---:|---:|---:|"]
    for kind, s in result["by_type"].items():
        lines.append(
            f"| {kind} | {s['count']} | {ms(s['p50_ms'])} | {ms(s['p99_ms'])} | {ms(s['p999_ms'])} | {s['errors']} |"
        )
    return [*lines, ""]


def ratio(a: Any, b: Any) -> float | None:
    if not a or not b:
        return None
    return float(a) / float(b)


def verdict(ok: Any) -> str:
    return "n/a" if ok is None else ("met" if ok else "**missed**")


def edge_verdict(edge_ratio: float | None, bare: dict[str, Any]) -> str:
    """A floor that passed the ladder's top is only a lower bound, so a ratio to it can only show a miss.

    With no floor there is no verdict; a service that sustained no step against one misses."""
    if not bare.get("sustainable"):
        return "n/a"
    met = (edge_ratio or 0.0) >= 0.5
    if met and bare.get("topped"):
        return "not shown (the floor passed the ladder's top)"
    return verdict(met)


def render(r: dict[str, Any], command: str) -> str:
    m = r["machine"]
    memory = r["broker"] == "memory"
    rerun = "python -m bench.run --broker memory" if memory else "make bench"
    out: list[str] = [
        "# Benchmarks" + (" on the memory broker (Tansu)" if memory else ""),
        "",
        f"Written by `bench/run.py`; rerun with `{rerun}` (about nine minutes). Numbers from one run on one",
        "small machine; the load generator, the broker and the service share its cores, so read them as",
        "orders of magnitude and for relative comparisons, not as capacity planning figures.",
        "",
        (
            "The Kafka figures are in docs/benchmarks.md (`make bench`)."
            if memory
            else "The same bench on the in-memory Tansu broker: bench/out/tansu.md"
            " (`python -m bench.run --broker memory`)."
        ),
        "",
        "## Run",
        "",
        f"- broker: {r['broker_label']}",
        f"- date: {r['date']}",
        f"- machine: {m.get('cores')} cores ({m.get('cpu', '?')}), {m.get('memory_gb', '?')} GB memory, "
        f"Linux {m.get('kernel')}, Python {m.get('python')}",
        f"- commit: {m.get('commit', '?')}",
        f"- command: `{command}`; whole run {r.get('elapsed_s')} s, service start-up {r.get('startup_s')} s",
        f"- load average at start / end: {r.get('loadavg_start')} / {r.get('loadavg_end')}"
        " (other work on the machine, such as a test suite, shows up here and makes the run noisy)",
        f"- host speed at start / end: a plain Python loop of 10M additions took {r.get('host_speed_start_s')} /"
        f" {r.get('host_speed_end_s')} s (a shared host that slows down shows up here: compare it across runs)",
        *(
            [
                f"- **the machine was overloaded during this run** (load average {r.get('loadavg_end')} on "
                f"{m.get('cores')} cores): other jobs competed for the CPU, so every figure below is pessimistic"
            ]
            if float(str(r.get("loadavg_end", "0")).split()[0]) > (m.get("cores") or 1)
            else []
        ),
        f"- {r['args'].get('accounts')} guard-plan accounts (live monitor on), 25 protected numbers each; "
        f"{r.get('calls_driven', '?')} calls driven in all, touching {r.get('numbers_touched', '?')} numbers",
        "",
        "## Method",
        "",
        "- The real service: `callscreen run` (its broker, one Faust worker, alerting, the edge) in a temporary",
        "  data dir. The edge runs in the `callscreen run` process; the broker, workers and alerting are its children.",
        *services_method(r),
        "- Load: `bench/loadgen.py` in its own process on uvloop, with its own keep-alive HTTP/1.1 client"
        " (`bench/http_client.py`, up to 256 connections), loopback only.",
        "  **Open loop**: Poisson arrivals at the offered rate are scheduled up front and every latency is",
        "  measured from the *intended* send time, so a server that falls behind is charged for its queue (no",
        "  coordinated omission). Events of one call are chained (an event leaves at its intended time or when",
        "  the call's previous event was answered, whichever is later) and the wait counts in its latency.",
        "  The first 20% of each run (at most 1 s) is warm-up and not counted. Requests not answered within",
        "  the run's drain time are errors and count as infinitely slow in the percentiles, and so are the",
        "  turns and end of a call whose `call.started` failed: a platform gives up a call it could not start,",
        "  so they are not sent, and they count at the time of the start that failed.",
        "- Traffic: `call.started`, 10–40 turns (`turn.started`/`turn.ended`, roles alternating, `at` increasing",
        "  on a plausible timeline), `call.ended`; calls spread round-robin over every account and number so",
        "  no account nears its 1,200 events/min limit. Calls still open when a run ends are closed afterwards,",
        "  unmeasured, and the next run waits until the worker has folded everything (heartbeat positions).",
        "- Sustainable rate: the highest offered rate on the ladder "
        f"{'/'.join(f'{rate:g}' for rate in r.get('ladder', []))} whose p99 < 50 ms with < 1% errors, "
        f"each step offering its rate for {float(r['args'].get('step_seconds', 10)):g} s: "
        "the search stops at the first step that fails, so one stall in a step decides it. The turn search",
        f"  starts at {float(r['args'].get('turn_start', 500)):g}/s and the bare server's at "
        f"{float(r['args'].get('bare_start', 3000)):g}/s, each stepping up while a step passes and down while",
        "  one fails.",
        "- Worker lag: end offsets of the events topic minus the fold positions the worker heartbeats each second.",
        "",
        f"## (a) `call.started` only at {float(r['args'].get('start_rate', 200)):g}/s "
        f"for {float(r['args'].get('start_seconds', 20)):g} s",
        "",
    ]
    warmup = r.get("warmup")
    if warmup:
        s = warmup["all"]
        # Kafka's JVM compiles its hot paths in the first seconds; Tansu is native code and warms nothing.
        why = "a fresh service's first calls" if memory else "a fresh broker's JVM is still compiling"
        out += [
            f"After {float(r['args'].get('warmup_seconds', 0)):g} s at the same rate, not measured ({why}: "
            f"that warm-up answered with p50 {s['p50_ms']} ms, p99 {s['p99_ms']} ms).",
            "",
        ]
    fixed = r.get("starts_fixed")
    outbound = r.get("outbound_fixed")
    if fixed:
        rows = [run_row(fixed, f"{fixed['rate']:g} inbound")]
        if outbound:
            rows.append(run_row(outbound, f"{outbound['rate']:g} outbound"))
        out += [RUN_HEADER, *rows, ""]
        for run in (fixed, outbound):
            if run and run.get("error_samples"):
                out += [f"Error answers seen: `{run['error_samples']}`", ""]
    out += [TURNS_HEADING, ""]
    out += search_table(r.get("turns"))
    turns = r.get("turns") or {}
    if turns.get("steps"):
        top = max(turns["steps"], key=lambda s: s["rate"] if s["all"]["p99_ms"] is not None else -1)
        out += [f"By event type at {top['rate']:g}/s:", "", *by_type_table(top)]
    out += ["## `call.started`: sustainable rate", ""]
    out += search_table(r.get("starts"))

    out += ["## Baselines on the same broker", "", "### Bare edge: aiohttp + aiokafka append, same load", ""]
    producer = "one record per batch, as Tansu needs" if memory else "idempotent, batches as aiokafka builds them"
    out += [
        "`bench/baselines.py serve`: the handler parses the JSON body and appends it with the service's own",
        f"producer settings (`callscreen.kafka.make_producer`: acks=all, linger 0, {producer}), waiting for",
        "the ack, on the edge's event loop (`event_loop`, uvloop by default). No auth, no validation, no worker",
        "round trip. Its CPU is in the edge's column; the service's worker stands idle beside it.",
        "",
    ]
    out += search_table(r.get("bare_server"))
    fold = r.get("fold") or {}
    consumer = r.get("bare_consumer") or {}
    out += fold_section(fold, consumer)
    out += floor_section(r.get("faust_floor") or [], fold.get("per_s"), consumer.get("per_s"))
    out += floors_without_faust(r.get("lean_floor"), r.get("domain_floor"), fold.get("per_s"), consumer.get("per_s"))
    out += growth_section(r.get("partition_growth") or [])

    out += ["## Memory (RSS)", ""]
    out += rss_table(r)

    turn_best = (r.get("turns") or {}).get("sustainable")
    bare_best = (r.get("bare_server") or {}).get("sustainable")
    edge_ratio = ratio(turn_best, bare_best)
    fold_ratio = ratio(fold.get("per_s"), consumer.get("per_s"))
    stock_ratio = fold.get("stock_ratio")
    rss = r.get("rss_end") or {}
    worker_rss = max((v["rss_mb"] for k, v in rss.items() if k.startswith("worker")), default=None)
    edge_rss = next((v["rss_mb"] for k, v in rss.items() if k.startswith("edge")), None)
    f = (fixed or {}).get("all", {})
    p50, p99 = f.get("p50_ms"), f.get("p99_ms")
    outbound_p99 = (outbound or {}).get("all", {}).get("p99_ms")
    turn_steps = {s["rate"]: s for s in (r.get("turns") or {}).get("steps", [])}
    out += [
        "## Targets",
        "",
        TARGETS_NOTE,
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
        # Two decimals: a figure a hair over the bound must not print as the bound itself.
        f"| `call.started` p50 ≤ 5 ms at 200/s | {ms(p50, 2)} ms | {verdict(fixed and p50 is not None and p50 <= 5)} |",
        f"| `call.started` p99 ≤ 20 ms at 200/s | {ms(p99, 2)} ms "
        f"| {verdict(fixed and p99 is not None and p99 <= 20)} |",
        f"| outbound `call.started` p99 ≤ 20 ms at 200/s | {ms(outbound_p99, 2)} ms "
        f"| {verdict(None if outbound is None else outbound_p99 is not None and outbound_p99 <= 20)} |",
        f"| turns sustainable ≥ 1,500 ev/s with p99 ≤ 50 ms | {turn_best or '< lowest step'} ev/s "
        f"| {verdict((turn_best or 0) >= 1500)} |",
        f"| edge ≥ 0.5× bare floor | {fmt_ratio(edge_ratio)} ({turn_best} vs {bare_best} ev/s sustainable) | "
        f"{edge_verdict(edge_ratio, r.get('bare_server') or {})} |",
        f"| worker folds ≥ 0.3× bare consumer | {fmt_ratio(fold_ratio)} ({fold.get('per_s')} vs "
        f"{consumer.get('per_s')} records/s) | {verdict(None if fold_ratio is None else fold_ratio >= 0.3)} |",
        f"| worker folds ≥ 2× stock Faust, one table write per record | {fmt_ratio(stock_ratio)} "
        f"(median of {len(fold.get('rounds') or [])} rounds, each beside its own Faust run) "
        f"| {verdict(None if stock_ratio is None else stock_ratio >= 2)} |",
        f"| RSS ≤ 400 MB per worker | {ms(worker_rss)} MB "
        f"| {verdict(None if worker_rss is None else worker_rss <= 400)} |",
        f"| RSS ≤ 150 MB edge | {ms(edge_rss)} MB | {verdict(None if edge_rss is None else edge_rss <= 150)} |",
        "",
    ]
    if 1500 not in turn_steps and turn_best is not None and turn_best < 1500:
        out += ["Turn traffic at 1,500/s was not offered: the search stopped at the first failing step.", ""]

    prof = r.get("profile")
    if prof:
        out += profile_section(prof)
    log = r.get("service_log") or {}
    if "lines" in log:
        out += ["## Service log during the run", ""]
        if log.get("top"):
            out += [
                f"{log.get('flagged')} warning/error lines of {log.get('lines')} (numbers folded to N):",
                "",
                "| count | message |",
                "|---:|---|",
                *[f"| {n} | `{msg}` |" for msg, n in log["top"]],
                "",
            ]
        else:
            said = f"{log['lines']} line" + ("" if log["lines"] == 1 else "s")
            out += [f"No warning or error in what the services logged ({said}).", ""]
    notes = r.get("notes") or []
    if notes:
        out += ["## Notes from this run", "", *[f"- {n}" for n in notes], ""]
    return "\n".join(out)


def services_method(r: dict[str, Any]) -> list[str]:
    """How many services the run started, and why."""
    if r["broker"] != "memory":
        return [
            "- One service for the whole run: Kafka's fetch cost does not depend on a partition's length, so",
            "  the phases follow one another on the same broker and topics (the bare consumer reads everything the",
            "  earlier phases appended too; stock Faust reads a copy of each fold round's backlog).",
        ]
    return [
        "- A fresh service, with a fresh memory broker and as many new accounts, for each of: scenario (a), the",
        "  turn search with its baseline, the fold phase with its floors, and the `call.started` search"
        f" (started this run: {', '.join(r.get('fresh_services') or []) or 'none'}). Tansu's",
        '  fetches slow down as its partitions fill ("Memory broker: reading a partition as it grows"',
        "  below), so a phase run after the others would measure what they left in the broker.",
    ]


def fold_section(fold: dict[str, Any], consumer: dict[str, Any]) -> list[str]:
    """The fold rounds, each worker fold beside stock Faust over the same records, and the bare consumer."""
    append = fold.get("append", {})
    out = [
        "### Worker fold rate vs stock Faust and the bare consumer",
        "",
        f"Each round appends `{append.get('calls', '?')}` calls (start and end, {append.get('records', '?')} records)",
        "straight to the events topic exactly as the edge writes them (same validation, envelope and key; no",
        "HTTP, no reply) while the worker is paused (SIGSTOP), then lets it fold them with nothing else running.",
        "The fold is done once the detector has folded the facts the events' folds appended too (one a start or",
        "end, and the few the detectors place, on the decisions topic). Its rate runs from its consumer group's",
        "first commit inside the backlog (polled every 50 ms) to the commit that covers both topics' ends, so",
        "neither the append nor the worker's start-up counts, and its last flush does. Until 2026-11-29 it was",
        "the events topic's slope alone (shown beside it), and the detector's fold, which runs behind the",
        "events' and catches up after them, was left out (docs/decisions/0028-fold-rate-beside-stock-faust.md).",
        "The CPU a record runs from the resumption to that last commit. The",
        "same records are then copied to a topic of their own and folded by stock Faust with one table write a",
        "record: `bench/faust_floor.py`, a Faust app with the worker's own settings",
        "(`processors.app.make_faust_app`), one agent at concurrency 1, decoding each record and writing it to a",
        "stock Faust table (each write one single-record changelog produce), its clock from its first record to",
        "its last. The host's speed drifts from minute to minute, so each ratio is of a round's two neighbours",
        "in time, and the target takes the median. The worker appends one fact per start or end, and its tables",
        "(the call, its index entry, its sweep entry, the detector's per-number state) write behind: each changed",
        "key is one changelog record per 200 ms flush, however often it changed.",
        "",
        "A backlog long enough for a dozen commits or more keeps the rate from resting on two or three",
        "(half-second commits over a backlog of a few seconds put it anywhere from 1.4x to 2.6x stock Faust).",
        "Each round also gives the rate from the worker's resumption to its last commit on both topics (its",
        "start-up and final flush included): a lower bound, and the ratio to stock Faust by it.",
        "",
        "| round | worker records/s | events topic's slope | commits inside | worker CPU µs a record "
        "| stock Faust records/s | worker vs Faust | resumed to drained, records/s | vs Faust by it |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for number, one in enumerate(fold.get("rounds") or [], start=1):
        faust = one.get("faust") or {}
        worker, stock = one.get("per_s"), faust.get("per_s")
        drained = drained_rate(one)
        out.append(
            f"| {number} | {worker or '—'} | {one.get('events_per_s') or '—'} | {one.get('commits', '—')} "
            f"| {one.get('cpu_us_per_record') or '—'} "
            f"| {stock or faust.get('error', '—')} | {fmt_ratio(ratio(worker, stock))} "
            f"| {drained or '—'} | {fmt_ratio(ratio(drained, stock))} |"
        )
    against_consumer = fmt_ratio(ratio(fold.get("per_s"), consumer.get("per_s")))
    out += [
        f"| median | {fold.get('per_s') or '—'} | | | | | {fmt_ratio(fold.get('stock_ratio'))} | | |",
        "",
        "The bare consumer (`bench/baselines.py consume`) reads the whole events topic from offset 0 with the",
        "service's consumer settings, decoding each value with orjson and doing nothing else: "
        f"{consumer.get('per_s', '—')} records/s ({consumer.get('records', '?')} records in "
        f"{consumer.get('seconds', '?')} s), the worker's median {against_consumer} of it.",
        "",
    ]
    return out


def drained_rate(fold_round: dict[str, Any]) -> float | None:
    """Records a second from the worker's resumption to the commit that covered the whole backlog."""
    seconds, records = fold_round.get("drained_s"), fold_round.get("records")
    return round(records / seconds, 1) if seconds and records else None


def floor_section(floors: list[dict[str, Any]], fold_rate: Any, consumer_rate: Any) -> list[str]:
    """Faust with no table over the first round's records: Faust's own cost before any write."""
    if not floors:
        return []
    out = [
        "### Faust with no table",
        "",
        "The same Faust app over the first round's copy, decoding each record and writing nothing.",
        "",
        "| K tables written per record | records/s | vs bare consumer | worker (median) vs this floor |",
        "|---:|---:|---:|---:|",
    ]
    for floor in floors:
        if "per_s" not in floor:
            out.append(f"| {floor.get('tables')} | {floor.get('error', '—')} | | |")
            continue
        rate = floor["per_s"]
        out.append(
            f"| {floor['tables']} | {rate} | {fmt_ratio(ratio(rate, consumer_rate))} "
            f"| {fmt_ratio(ratio(fold_rate, rate))} |"
        )
    return [*out, ""]


def floors_without_faust(
    lean: dict[str, Any] | None, domain: dict[str, Any] | None, fold_rate: Any, consumer_rate: Any
) -> list[str]:
    """What the same work costs without Faust, and what the domain's rules cost alone."""
    rows = [
        ("the worker's fold without Faust (`bench/lean_floor.py`)", lean),
        ("the domain alone, in memory (`bench/domain_floor.py`)", domain),
    ]
    if not any(floor for _, floor in rows):
        return []
    out = [
        "### The fold without Faust, and the domain alone",
        "",
        "`bench/lean_floor.py` reads the first round's backlog (its copy, the records the worker folded) with a plain",
        "aiokafka consumer and folds each record with the worker's domain functions and RocksDB options, in a",
        "fresh data directory: the call's row, the feature view, the listing index and sweep entry, the number's",
        "detectors, each fact and each fetched batch's changed rows appended once. It leaves out Faust, the",
        "detectors' round trip through the decisions topic, the answers and the facts mirror: one plain loop",
        "doing the fold's own work. It was the bound for a worker without Faust's per-record path; the worker's",
        "folds now read feeds instead of Faust's streams (`processors/faust/feed.py`), and the last column says how",
        "close that comes. `bench/domain_floor.py`",
        "folds as many calls, built the same way, through `callscreen/testing.py`: the same domain functions over",
        "plain data with no Kafka, Faust or RocksDB, the ceiling of any adapter. CPU per record counts every",
        "thread of the process (RocksDB flushes in the background).",
        "",
        "| floor | records | records/s | CPU per record (µs) | vs bare consumer | worker vs this floor |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, floor in rows:
        if not floor:
            continue
        if "per_s" not in floor:
            out.append(f"| {label} | {floor.get('error', '—')} | | | | |")
            continue
        out.append(
            f"| {label} | {floor['records']} | {floor['per_s']} | {floor['cpu_us_per_record']} "
            f"| {fmt_ratio(ratio(floor['per_s'], consumer_rate))} | {fmt_ratio(ratio(fold_rate, floor['per_s']))} |"
        )
    return [*out, ""]


def growth_section(rows: list[dict[str, Any]]) -> list[str]:
    """The memory broker's fetch against one partition's length: the bound of any long run on it."""
    if not rows:
        return []
    out = [
        "### Memory broker: reading a partition as it grows",
        "",
        "`bench/partition_growth.py`: a fresh one-partition topic on the same broker, filled with 300-byte",
        "single-record batches (the memory broker's producer settings) to each size in turn, then read from offset 0",
        "with the service's consumer settings for at most 5 s. Tansu 0.6.0's memory engine does work per",
        "stored batch on every fetch, and every record is its own batch here, so the cost of each fetch grows",
        "with the partition. Every follower of a partition past the cliff (a worker, a mirror, the edge's",
        "status follower) slows the same way and keeps the broker's CPU busy while it waits.",
        "",
        "| records in the partition | read in ≤ 5 s | records/s | records per fetch |",
        "|---:|---:|---:|---:|",
    ]
    out += [f"| {r['records']} | {r['read']} | {r['per_s']} | {r['per_fetch']} |" for r in rows]
    return [*out, ""]


def fmt_ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


def rss_table(r: dict[str, Any]) -> list[str]:
    found = [
        ("at start", r.get("rss_start")),
        ("after fold phase", r.get("rss_after_fold")),
        ("at end", r.get("rss_end")),
    ]
    snaps: list[tuple[str, dict[str, Any]]] = [(name, s) for name, s in found if s]
    if not snaps:
        return ["_Not measured._", ""]
    roles = list(dict.fromkeys(role for _, s in snaps for role in s))
    head = "| process | " + " | ".join(f"RSS MB {name}" for name, _ in snaps) + " | peak (VmHWM) MB |"
    memory = r["broker"] == "memory"
    when = (
        "At start = scenario (a)'s service; after fold phase = the fold phase's service; at end = the"
        " `call.started` search's service (each phase starts a fresh one)."
        if memory
        else "One service for the whole run: at start = once the accounts were created; after the fold phase; at"
        " end = after the last phase."
    )
    lines = [f"VmRSS from `/proc/<pid>/status`. {when}", "", head, "|---|" + "---:|" * (len(snaps) + 1)]
    for role in roles:
        cells = [str(s.get(role, {}).get("rss_mb", "—")) for _, s in snaps]
        peak = max((s.get(role, {}).get("hwm_mb", 0) for _, s in snaps), default=0)
        lines.append(f"| {role} | " + " | ".join(cells) + f" | {peak} |")
    heaps = [s.get("broker", {}) for _, s in snaps]
    if any("heap_used_mb" in heap for heap in heaps):
        cells = [f"{heap.get('heap_used_mb', '—')} / {heap.get('heap_committed_mb', '—')}" for heap in heaps]
        lines.append("| broker Java heap in use / committed (`jcmd GC.heap_info`) | " + " | ".join(cells) + " | |")
    if r.get("rss_bare_server") is not None:
        lines.append(f"| bare baseline server | {r['rss_bare_server']} (after its search) |" + " |" * len(snaps))
    curve = (
        "as far as the memory broker goes: `bench/out/memory-tansu.md` (`python -m bench.memory --broker"
        " memory`, about 3 minutes)."
        if memory
        else '"Memory, soak and overload" below (`make bench-memory`, about 2 minutes, 10 at most).'
    )
    lines += [
        "",
        f"These services fold a few thousand calls. RSS as calls accumulate toward the issue's 100,000: {curve}",
    ]
    return [*lines, ""]


def profile_section(profiles: list[dict[str, Any]]) -> list[str]:
    out = ["## Profile (`--profile`)", ""]
    for prof in profiles:
        if prof.get("error"):
            return [*out, prof["error"], ""]
        if prof["mode"] == "fold":
            out += fold_profile(prof)
            continue
        what = "turn traffic (full calls)" if prof["mode"] == "calls" else "`call.started` only"
        out += [
            f"py-spy (200 Hz, non-blocking) on the edge and the worker for {prof['seconds']} s of {what} at "
            f"{prof['rate']:g}/s. Own = samples with the function on top of the stack; total = anywhere in it.",
            "Flame graphs: " + ", ".join(f"[{name}]({path})" for name, path in prof.get("graphs", {}).items()),
            "",
        ]
        for name, top in prof.get("top", {}).items():
            out += top_table(f"{prof['mode']}: {name}", top)
    return out


def top_table(heading: str, top: dict[str, Any]) -> list[str]:
    """One process's top functions (`bench.profile.top_functions`) under its heading."""
    return [
        f"### {heading} ({top['samples']} samples)",
        "",
        "| function | own % | total % |",
        "|---|---:|---:|",
        *[f"| `{fn}` | {own} | {total} |" for fn, own, total in top["rows"]],
        "",
    ]


def fold_profile(prof: dict[str, Any]) -> list[str]:
    """Where the worker's CPU went while it folded a backlog, by part (`bench.profile.parts`)."""
    graph = prof.get("graphs", {}).get("worker", "")
    out = [
        "py-spy (200 Hz, samples holding the GIL only, the worker paused for each) while the worker folded "
        f"{prof['calls']} calls appended straight to the events topic ({prof['seconds']} s to the drain); "
        f"flame graph: [worker]({graph}).",
        "",
        f"### fold: where the worker's CPU went ({prof['parts']['samples']} samples)",
        "",
        "| part (bench/profile.py, `FOLD_PARTS` and `LIBRARY_PARTS`) | % of samples |",
        "|---|---:|",
    ]
    out += [*[f"| {name} | {share} |" for name, share in prof["parts"]["rows"]], ""]
    for name, top in prof.get("top", {}).items():
        out += top_table(f"fold: {name}", top)
    return out


# Sections other commands write into docs/benchmarks.md, carried over when `bench.run` writes it again: the
# carrier gate's (`bench.gate`), a platform's webhooks beside `/v1/events` (`bench.adapters`), shadow runs
# beside live starts (`bench.shadow`), and the latest
# memory, soak and overload figures, copied from their full reports in bench/out/. In this order at the end.
KEPT_SECTIONS = ("gate", "adapters", "shadow", "elsewhere")


def markers(name: str) -> tuple[str, str]:
    """The comments around a section that another command writes into a document."""
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def with_section(document: str, name: str, section: str) -> str:
    """The document with its section `name` replaced, or with it added at the end."""
    begin, end = markers(name)
    if begin in document and end in document:
        head, rest = document.split(begin, 1)
        return head + section + rest.split(end, 1)[1]
    return document.rstrip("\n") + "\n\n" + section + "\n"


def turn_rate_found(document: str) -> float | None:
    """The sustainable turn-traffic rate an earlier report found; None when it found none."""
    _, found, rest = document.partition(TURNS_HEADING)
    match = re.search(r"^\*\*sustainable: ([0-9.]+) /s\*\*", rest.split("\n## ", 1)[0], re.MULTILINE)
    return float(match.group(1)) if found and match else None


def section_of(document: str, name: str) -> str | None:
    """The section `name` of an earlier report, markers included, for a command to carry over."""
    begin, end = markers(name)
    if begin in document and end in document:
        return begin + document.split(begin, 1)[1].split(end, 1)[0] + end
    return None
