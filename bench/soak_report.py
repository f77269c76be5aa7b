"""bench/out/soak.md and its two pictures, from the results of `bench.soak`."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on a server

import matplotlib.pyplot as plt

from bench import report
from bench.run import P99_TARGET_MS

P99_DRIFT = 1.5  # the last minute's p99 within 1.5× the first (the target)
RSS_GROWTH = 0.10  # RSS growth after warm-up under 10%
WARMUP_MINUTES = 2
LAG_SECONDS = 2.0  # lag is bounded if never over two seconds of arrivals (heartbeats are a second apart)
TITLE = "# Soak and overload\n\n`make bench-soak` and `make bench-overload` write this page (`bench/soak.py`).\n"
ROLES = ("worker", "edge (callscreen run)", "alerting")


def per_minute(soak: dict[str, Any]) -> list[dict[str, Any]]:
    """One row a minute: the load's statistics, the largest lag sampled, each role's RSS at its end."""
    rows = []
    lags = soak["samples"]["lag"]
    rss = soak["samples"]["rss"]
    for window in soak["result"]["windows"]:
        start = float(window["start_s"])
        in_minute = [lag for t, lag in lags if start <= t < start + 60]
        at_end = [snap for t, snap in rss if t <= start + 60 + 1]
        rows.append(
            window
            | {
                "minute": int(start // 60) + 1,
                "max_lag": max(in_minute, default=None),
                "rss": {role: at_end[-1].get(role, {}).get("rss_mb") for role in ROLES} if at_end else {},
                "rocksdb_mb": at_end[-1].get("rocksdb_mb") if at_end else None,
            }
        )
    return rows


def soak_verdicts(soak: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    first, last = rows[0]["p99_ms"], rows[-1]["p99_ms"]
    lines = []
    if first and last:
        ratio = last / first
        met = "met" if ratio <= P99_DRIFT else "missed"
        lines.append(f"- p99 last minute / first: {last} / {first} ms = **{ratio:.2f}×, {met}** (≤ {P99_DRIFT}×).")
    else:
        lines.append("- p99 drift: not measured (a minute lost more than 1% of its events).")
    bound = soak["rate"] * LAG_SECONDS
    worst = max((r["max_lag"] or 0 for r in rows), default=0)
    met = "met" if worst <= bound else "missed"
    lines.append(
        f"- Largest lag sampled: **{worst} records, {met}** (bounded: never over {LAG_SECONDS:g} s of arrivals,"
        f" {bound:g} records). The fold position comes from the worker's once-a-second heartbeats, so a sample"
        " taken just before a heartbeat sees up to a second of arrivals that are in fact folded; the sawtooth in"
        " the picture is the 2 s sampling beating against that heartbeat."
    )
    if len(rows) > WARMUP_MINUTES:
        for role in ("worker", "edge (callscreen run)"):
            before, after = rows[WARMUP_MINUTES - 1]["rss"].get(role), rows[-1]["rss"].get(role)
            if before and after:
                growth = after / before - 1
                met = "met" if growth < RSS_GROWTH else "missed"
                lines.append(
                    f"- {role} RSS after minute {WARMUP_MINUTES} → end: {before} → {after} MB ="
                    f" **{growth:+.1%}, {met}** (< {RSS_GROWTH:.0%})."
                )
        before, after = rows[WARMUP_MINUTES - 1], rows[-1]
        if before["rss"].get("worker") and after["rss"].get("worker") and before["rocksdb_mb"] and after["rocksdb_mb"]:
            rest_before = before["rss"]["worker"] - before["rocksdb_mb"]
            rest_after = after["rss"]["worker"] - after["rocksdb_mb"]
            lines.append(
                "- Of the worker's growth, its RocksDB cache (bounded by `rocksdb_memory_mb`):"
                f" {before['rocksdb_mb']} → {after['rocksdb_mb']} MB; the rest {rest_before:.1f} →"
                f" {rest_after:.1f} MB = {rest_after / rest_before - 1:+.1%}."
            )
    errors = sum(r["errors"] for r in rows)
    lines.append(f"- Errors: {errors} of {sum(r['count'] for r in rows)} events.")
    return lines


def prefill_lines(before: dict[str, Any] | None) -> list[str]:
    if before is None:
        return ["The store was empty at the start.", ""]
    worker = before["rss"].get("worker", {}).get("rss_mb")
    return [
        f"Before the first minute the store was filled with {before['calls']:,} calls (start and end,"
        f" {before['records']:,} records appended straight to the events topic, `bench/prefill.py`), folded"
        f" {before['drained_s']} s after the last was appended: worker RSS {worker}"
        f" MB, its RocksDB cache {before['rocksdb_mb']} MB. A running service has state, and its cache is full"
        " of it; from an empty store the cache fills towards its budget during the soak.",
        "",
    ]


def soak_section(results: dict[str, Any], command: str) -> str:
    soak = results["soak"]
    rows = per_minute(soak)
    begin, end = report.markers("soak")
    table = [
        "| minute | events | p50 ms | p99 ms | errors | max lag | worker RSS MB | its RocksDB cache MB | edge RSS MB |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        rss = r["rss"]
        table.append(
            f"| {r['minute']} | {r['count']} | {r['p50_ms']} | {r['p99_ms']} | {r['errors']} | {r['max_lag']} |"
            f" {rss.get('worker')} | {r['rocksdb_mb']} | {rss.get('edge (callscreen run)')} |"
        )
    return "\n".join(
        [
            begin,
            f"## Soak: {soak['seconds'] / 60:g} minutes at {soak['rate']:g} events/s",
            "",
            header(results, command)
            + f" Full calls (start, 10-40 turns, end) at half the sustainable turn rate ({results['sustainable']:g}"
            " events/s, docs/benchmarks.md), from the first second on.",
            "",
            *prefill_lines(soak.get("prefill")),
            "![p99, lag and RSS per minute](soak.png)",
            "",
            *table,
            "",
            *soak_verdicts(soak, rows),
            "",
            end,
        ]
    )


def overload_section(results: dict[str, Any], command: str) -> str:
    over = results["overload"]
    (high, step), (low, _) = over["steps"]
    lost = over["lost"]
    recovered = over["recovered_s"]
    begin, end = report.markers("overload")
    table = [
        "| from s | offered | p50 ms | p99 ms | errors | max lag | CPU % edge / worker / broker / alerting |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    lags = over["samples"]["lag"]
    cpu = over["samples"].get("cpu", [])
    for w in over["result"]["windows"]:
        start = float(w["start_s"])
        lag = max((v for t, v in lags if start <= t < start + 5), default=None)
        table.append(
            f"| {start:g} | {high if start < step else low:g}/s | {w['p50_ms']} | {w['p99_ms']} |"
            f" {w['errors']} | {lag} | {window_cpu(cpu, start, start + 5)} |"
        )
    met = "met" if recovered is not None and recovered <= 30 else "missed"
    shown = "never" if recovered is None else f"{recovered:g} s"
    return "\n".join(
        [
            begin,
            f"## Recovery from overload: {high:g} events/s for {step:g} s, then {low:g}",
            "",
            header(results, command) + " Twice the sustainable turn rate, then half of it; p99 per 5 s of"
            " intended send times, the largest worker lag sampled in each 5 s (once a second), and each service"
            " process's CPU over the 5 s in percent of one core (sampled with the lag). The turns and"
            " end of a call whose start failed are not sent and count as errors in the window of that start.",
            "",
            "![p99 per 5 s through the overload and after the drop](overload.png)",
            "",
            f"- p99 back under {P99_TARGET_MS:g} ms for good: **{shown} after the drop, {met}** (≤ 30 s).",
            f"- Worker drained {fmt_seconds(over['drained_s'])} after the last arrival.",
            f"- Nothing acknowledged lost: **{lost['missing']} of {lost['calls']} calls short** of their"
            f" acknowledged events ({lost['acknowledged_events']} events acknowledged; each call read back"
            " through `GET /v1/calls/{call_id}`: its turns and its end)."
            + (f" Examples: {'; '.join(lost['examples'])}." if lost["examples"] else ""),
            f"- Errors by kind (the commonest): {errors_by_kind(over['result'])}.",
            warmup_line(over["warmup"]),
            "- The load generator's longest garbage-collector pause:"
            f" {over['result'].get('loadgen_gc_max_pause_ms')} ms (latency it would charge to the service).",
            "",
            *table,
            "",
            end,
        ]
    )


def warmup_line(warmup: dict[str, Any]) -> str:
    """The unmeasured warm-up before the overload: what a fresh service's first seconds cost."""
    s = warmup["all"]
    p99 = " / ".join(str(w["p99_ms"]) for w in warmup["windows"])
    return (
        f"- Before it, {warmup['seconds']:g} s of full calls at {warmup['rate']:g} events/s, not measured (a fresh"
        f" broker's first seconds): p50 {s['p50_ms']} ms, p99 {s['p99_ms']} ms, {s['errors']} errors;"
        f" p99 per 5 s: {p99} ms."
    )


def window_cpu(samples: list[Any], start: float, end: float) -> str:
    """Each process's mean CPU over the samples taken in [start, end), in percent of a core."""
    inside = [shares for t, shares in samples if start <= t < end]
    cells = []
    for role in ("edge", "worker", "broker", "alerting"):
        values = [shares[role] for shares in inside if role in shares]
        cells.append(f"{statistics.fmean(values):.0f}" if values else "—")
    return " / ".join(cells)


def errors_by_kind(result: dict[str, Any]) -> str:
    kinds = result.get("error_samples") or {}
    return "; ".join(f"{count} × `{kind}`" for kind, count in kinds.items()) or "none"


def fmt_seconds(value: float) -> str:
    return "not within 180 s" if value == float("inf") else f"{value:.1f} s"


def header(results: dict[str, Any], command: str) -> str:
    m = results["machine"]
    return (
        f"Written by `bench/soak.py` (`{command}`) on {results['date']}, commit {m.get('commit', '?')},"
        f" {m.get('cores')} cores ({m.get('cpu', '?')}), Python {m.get('python')}; one service on the local"
        " Apache Kafka, the load generator on the same machine, latency from the intended send time."
    )


def render(results: dict[str, Any], command: str, previous: str) -> str:
    """The document: the sections this run measured, the others kept from the previous document."""
    document = (
        previous
        or "# Soak and overload\n\n`make bench-soak` and `make bench-overload` write this page (`bench/soak.py`).\n"
    )
    if "soak" in results:
        document = report.with_section(document, "soak", soak_section(results, command))
    if "overload" in results:
        document = report.with_section(document, "overload", overload_section(results, command))
    return document


def draw_soak(soak: dict[str, Any], path: Path) -> None:
    rows = per_minute(soak)
    minutes = [r["minute"] for r in rows]
    figure, (latency, lag, rss) = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    latency.plot(minutes, [r["p99_ms"] for r in rows], marker="o", label="p99")
    latency.plot(minutes, [r["p50_ms"] for r in rows], marker="o", label="p50")
    latency.set_ylabel("ms")
    latency.set_ylim(bottom=0)
    latency.legend()
    latency.set_title(f"{soak['rate']:g} events/s of full calls for {soak['seconds'] / 60:g} minutes")
    lag.plot([t / 60 for t, _ in soak["samples"]["lag"]], [v for _, v in soak["samples"]["lag"]], linewidth=0.8)
    lag.set_ylabel("worker lag (records)")
    lag.set_ylim(bottom=0)
    for role in ROLES:
        rss.plot(minutes, [r["rss"].get(role) for r in rows], marker="o", label=role)
    rss.set_ylabel("RSS (MB)")
    rss.set_ylim(bottom=0)
    rss.set_xlabel("minute")
    rss.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def draw_overload(over: dict[str, Any], path: Path) -> None:
    (high, step), (low, _) = over["steps"]
    windows = over["result"]["windows"]
    figure, latency = plt.subplots(figsize=(8, 4))
    starts = [w["start_s"] for w in windows]
    # A window that lost more than 1% of its events has no p99: marked apart, at the top of the chart.
    top = max((w["p99_ms"] or 0 for w in windows), default=0) or P99_TARGET_MS
    latency.plot(starts, [w["p99_ms"] if w["p99_ms"] is not None else top for w in windows], marker="o")
    failed = [w["start_s"] for w in windows if w["p99_ms"] is None]
    if failed:
        latency.plot(failed, [top] * len(failed), "rx", markersize=10, label="over 1% failed: no p99")
    latency.axhline(P99_TARGET_MS, color="grey", linestyle="--", label=f"{P99_TARGET_MS:g} ms")
    latency.axvline(step, color="red", linestyle=":", label=f"drop from {high:g}/s to {low:g}/s")
    latency.set_yscale("log")
    latency.set_xlabel("seconds (intended send time)")
    latency.set_ylabel("p99 per 5 s (ms)")
    latency.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
