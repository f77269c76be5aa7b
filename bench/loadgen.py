"""Open-loop HTTP load generator, run as its own process: `python -m bench.loadgen RESULT < spec.json`.

Arrivals are scheduled up front at fixed intended send times (Poisson, at the offered rate), and
every latency is measured from the intended send time, not from when the request actually left:
a server that falls behind is charged for the queue it builds (no coordinated omission).

Events of one call are chained: an event is sent at its intended time or when the call's previous
event was answered, whichever is later (so turns never overtake their call's start); the wait
still counts in its latency. The run is bounded: `duration_s` of arrivals, then at most `drain_s`
for answers; whatever is still outstanding is cancelled and counted as `unfinished`.

Modes:
  starts  every arrival is a `call.started` of a new call; after the measured window the calls are
          closed with `call.ended` at `close_rate` (reported separately, not in the measured stats).
  outbound as `starts`, each an agent's outbound `call.started` (`direction: outbound`) from the protected
          number to a number of its own country, scored on where it goes too (decisions section 18).
  calls   full calls (start, 10-40 turns, end) from a pool of concurrent calls; every event counts.
          Calls still open when arrivals stop are closed afterwards, unmeasured.
  gate    every arrival is the carrier's "a call comes in" form POSTed to a number's gate (`gates`),
          alternately one the score rejects (`gate.reject`: the caller is the called number, its
          signature failed) and one it challenges (`gate.challenge`: a failed signature); an answer
          without the expected TwiML verb counts as an error.
  adapter two streams of full calls at `rate` requests/s each, on one clock and one client, each its own
          pool as in `calls`: Vapi's messages of each call (`traffic.vapi_call`: `status-update` in
          progress, a `speech-update` started and stopped per turn, `end-of-call-report`) signed with the
          account's secret as they leave and POSTed to its token path, `POST /v1/ingest/vapi/<ingest_token>`
          (`adapter_accounts`, `ingest`; stream `vapi`), and for `accounts` on `POST /v1/events` the bodies
          the Vapi parser makes of the same messages (`traffic.native_body`; stream `native`). Kinds are
          `<stream> start|turn|end`, with `by_stream` over each stream's all; a 2xx answer without the
          kind's answer (the score's `action`, the live `flags`, the end's `duration_s`), or with an `error`
          or `ignored` in it, counts as an error.

`rates` (a list of [rate, seconds]) replaces the one `rate` with a profile of steps, as the overload run
needs; `window_s` adds the statistics of each window of that many seconds (by intended send time);
`ledger` adds, per call, which of its events were acknowledged, so the caller can check that the service
lost none of them.

The spec is JSON on stdin; the result is one JSON object, written to the file RESULT. Not to stdout: a
ledger's result is megabytes, and read through a pipe it once came back cut at the pipe's 64 KiB.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import os
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import orjson
import uvloop

from bench.http_client import Client, HttpError
from bench.traffic import (
    BenchAccount,
    call_ended,
    call_started,
    caller_number,
    full_call,
    native_body,
    outbound_started,
    pick,
    vapi_call,
    vapi_headers,
)

REQUEST_TIMEOUT_S = 10.0

# Latencies are read from here, not from the loop's clock: uvloop's is libuv's, in whole milliseconds.
clock = time.perf_counter


@dataclass
class Sample:
    kind: str
    intended: float
    latency: float  # seconds from the intended send time to the answer; inf when none came
    status: int  # 0 when the request failed without an HTTP answer
    send_lag: float  # how late the request actually left (the generator's own slack)


@dataclass
class Spec:
    base_url: str
    accounts: list[BenchAccount]
    mode: str
    rate: float
    duration_s: float
    seed: int = 1
    warmup_s: float = 1.0
    drain_s: float = 10.0
    connections: int = 256
    close_rate: float = 400.0
    prefix: str = "b"
    concurrent_calls: int = 0
    call_offset: int = 0  # calls earlier runs made: accounts and numbers continue where they stopped
    gates: list[dict[str, str]] = field(default_factory=list)  # gate mode: each number's gate URL
    rates: list[tuple[float, float]] = field(default_factory=list)  # steps of [rate, seconds]; else `rate`
    window_s: float = 0.0
    ledger: bool = False
    adapter_accounts: list[BenchAccount] = field(default_factory=list)  # adapter mode: the Vapi stream's
    ingest: dict[str, dict[str, str]] = field(default_factory=dict)  # adapter mode: account id -> token, secret

    def steps(self) -> list[tuple[float, float]]:
        return [(float(r), float(s)) for r, s in self.rates] or [(self.rate, self.duration_s)]

    @staticmethod
    def from_json(raw: dict[str, Any]) -> Spec:
        accounts = [BenchAccount.from_json(a) for a in raw.pop("accounts")]
        adapter_accounts = [BenchAccount.from_json(a) for a in raw.pop("adapter_accounts", [])]
        return Spec(accounts=accounts, adapter_accounts=adapter_accounts, **raw)


@dataclass
class Plan:
    """Per call, its bodies with their intended send times (seconds after t0) and which count."""

    calls: list[tuple[str, list[tuple[float, dict[str, Any], bool]]]] = field(default_factory=list)


def poisson_arrivals(rng: random.Random, rate: float, duration_s: float) -> list[float]:
    return stepped_arrivals(rng, [(rate, duration_s)])


def stepped_arrivals(rng: random.Random, steps: list[tuple[float, float]]) -> list[float]:
    """Poisson arrivals at each step's rate, the steps one after the other."""
    times: list[float] = []
    begin = 0.0
    for rate, seconds in steps:
        t = begin + rng.expovariate(rate)
        while t < begin + seconds:
            times.append(t)
            t += rng.expovariate(rate)
        begin += seconds
    return times


def plan_starts(spec: Spec, rng: random.Random, wall0_ms: int) -> Plan:
    plan = Plan()
    arrivals = poisson_arrivals(rng, spec.rate, spec.duration_s)
    close_at = spec.duration_s + 0.5
    start = outbound_started if spec.mode == "outbound" else call_started
    for i, t in enumerate(arrivals):
        account, to = pick(spec.accounts, spec.call_offset + i)
        call_id = f"{spec.prefix}-s{i}"
        at = wall0_ms + int(t * 1000)
        ended = close_at + i / spec.close_rate
        bodies = [
            (t, start(call_id, to, caller_number(rng), at), True),
            (ended, call_ended(call_id, at + 1000), False),
        ]
        plan.calls.append((account.key, bodies))
    return plan


def plan_calls(spec: Spec, rng: random.Random, wall0_ms: int) -> Plan:
    """Arrivals are dealt round-robin to a pool of concurrent calls; a finished call is replaced."""
    plan = Plan()
    arrivals = stepped_arrivals(rng, spec.steps())
    # Enough concurrent calls that one call's consecutive events are ~0.25 s apart.
    slots = spec.concurrent_calls or max(20, int(max(rate for rate, _ in spec.steps()) * 0.25))
    active: list[tuple[int, list[dict[str, Any]], list[tuple[float, dict[str, Any], bool]]] | None] = [None] * slots
    serial = 0
    for i, t in enumerate(arrivals):
        slot = i % slots
        current = active[slot]
        if current is None:
            account, to = pick(spec.accounts, spec.call_offset + serial)
            bodies = full_call(rng, f"{spec.prefix}-c{serial}", to, wall0_ms + int(t * 1000))
            current = (serial, bodies, [])
            plan.calls.append((account.key, current[2]))
            serial += 1
        _, bodies, scheduled = current
        scheduled.append((t, bodies[len(scheduled)], True))
        active[slot] = None if len(scheduled) == len(bodies) else current
    # Close what is still open, unmeasured, after the window.
    close_at = spec.duration_s + 0.5
    closing = 0
    for current in active:
        if current is not None:
            _, bodies, scheduled = current
            scheduled.append((close_at + closing / spec.close_rate, bodies[-1], False))
            closing += 1
    return plan


async def drive(spec: Spec) -> dict[str, Any]:
    rng = random.Random(spec.seed)
    wall0_ms = int(time.time() * 1000) + 500
    starts = spec.mode in ("starts", "outbound")
    plan = plan_starts(spec, rng, wall0_ms) if starts else plan_calls(spec, rng, wall0_ms)
    samples: list[Sample] = []
    unmeasured: list[Sample] = []
    error_bodies: Counter[str] = Counter()
    skipped = 0
    # Per call: its account's key, then the events of each type the service acknowledged.
    acknowledged: dict[str, dict[str, Any]] = {}

    http = Client(spec.base_url, spec.connections, REQUEST_TIMEOUT_S)
    try:
        # Open the pool before the clock starts so the first second does not pay for connects.
        await asyncio.gather(*(http.request("GET", "/healthz") for _ in range(min(32, spec.connections))))
        t0 = clock() + 0.5

        async def one_call(key: str, events: list[tuple[float, dict[str, Any], bool]]) -> None:
            nonlocal skipped
            headers = f"Authorization: Bearer {key}\r\nContent-Type: application/json\r\n".encode()
            # Where the call's start failed: a platform gives up monitoring a call it could not start, so
            # its turns are not sent. Each counts as an error (infinitely slow) at that failure's time, not
            # at its own: the failure is the start's, and a later window would charge it to a service that
            # may by then have recovered.
            failed_at: float | None = None
            acks: Counter[str] = Counter()
            if spec.ledger and events:
                acknowledged[str(events[0][1]["call_id"])] = {"key": key, "acks": acks}
            for offset, body, measured in events:
                if failed_at is not None and body["type"] != "call.ended":
                    if measured:
                        skipped += 1
                        samples.append(Sample(body["type"], failed_at, math.inf, 0, 0.0))
                    continue
                intended = t0 + offset
                delay = intended - clock()
                if delay > 0:
                    await asyncio.sleep(delay)
                sent = clock()
                status = 0
                try:
                    status, payload = await http.request("POST", "/v1/events", orjson.dumps(body), headers)
                    if status >= 300:
                        error_bodies[f"{status} {payload[:80].decode(errors='replace')}"] += 1
                    else:
                        acks[body["type"]] += 1
                except (TimeoutError, HttpError) as exc:
                    error_bodies[type(exc).__name__] += 1
                done = clock()
                latency = done - intended if status else math.inf
                sample = Sample(body["type"], offset, latency, status, sent - intended)
                if failed_at is not None:
                    if measured:
                        skipped += 1
                        samples.append(Sample(body["type"], failed_at, math.inf, 0, 0.0))
                    unmeasured.append(sample)
                else:
                    (samples if measured else unmeasured).append(sample)
                if body["type"] == "call.started" and not 200 <= status < 300:
                    # Its end is still sent (unmeasured): a start the edge gave up on (503 past the answer
                    # deadline) stays in the log.
                    failed_at = offset

        tasks = [asyncio.create_task(one_call(key, events)) for key, events in plan.calls]
        last = max((events[-1][0] for _, events in plan.calls if events), default=0.0)
        _done, pending = await asyncio.wait(tasks, timeout=max(0.0, t0 + last - clock()) + spec.drain_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    finally:
        http.close()
    offered = sum(1 for _, events in plan.calls for _, _, measured in events if measured)
    extra: dict[str, Any] = {"skipped": skipped, "calls": len(plan.calls)}
    if spec.ledger:
        extra["ledger"] = {call: {"key": a["key"], "acks": dict(a["acks"])} for call, a in acknowledged.items()}
    return summarise(spec, samples, unmeasured, offered, error_bodies) | extra


def gate_form(call_sid: str, number: str, caller: str, stir: str) -> dict[str, str]:
    """The parameters Twilio posts to a number's voice URL when a call comes in."""
    return {
        "AccountSid": "AC" + "0" * 32,
        "CallSid": call_sid,
        "CallStatus": "ringing",
        "Direction": "inbound",
        "From": caller,
        "To": number,
        "StirVerstat": stir,
    }


async def drive_gate(spec: Spec) -> dict[str, Any]:
    rng = random.Random(spec.seed)
    arrivals = poisson_arrivals(rng, spec.rate, spec.duration_s)
    samples: list[Sample] = []
    error_bodies: Counter[str] = Counter()
    form_headers = b"Content-Type: application/x-www-form-urlencoded\r\n"
    http = Client(spec.base_url, spec.connections, REQUEST_TIMEOUT_S)
    try:
        await asyncio.gather(*(http.request("GET", "/healthz") for _ in range(min(32, spec.connections))))
        t0 = clock() + 0.5
        closing: set[asyncio.Task[None]] = set()

        async def one(index: int, offset: float) -> None:
            gate = spec.gates[index % len(spec.gates)]
            number = gate["number"]
            if index % 2 == 0:
                kind, verb = "gate.reject", b"<Reject"
                form = gate_form(f"CA{spec.prefix}{index:08d}", number, number, "TN-Validation-Failed-A")
            else:
                kind, verb = "gate.challenge", b"<Gather"
                caller = caller_number(rng)
                form = gate_form(f"CA{spec.prefix}{index:08d}", number, caller, "TN-Validation-Failed")
            path = urlsplit(gate["url"]).path
            intended = t0 + offset
            delay = intended - clock()
            if delay > 0:
                await asyncio.sleep(delay)
            sent = clock()
            status = 0
            try:
                status, payload = await http.request("POST", path, urlencode(form).encode(), form_headers)
                if status == 200 and verb not in payload:
                    error_bodies[f"unexpected {payload[:80].decode(errors='replace')}"] += 1
                    status = 0
                elif status >= 300:
                    error_bodies[f"{status} {payload[:80].decode(errors='replace')}"] += 1
            except (TimeoutError, HttpError) as exc:
                error_bodies[type(exc).__name__] += 1
            latency = clock() - intended if status else math.inf
            samples.append(Sample(kind, offset, latency, status, sent - intended))

        tasks = [asyncio.create_task(one(i, t)) for i, t in enumerate(arrivals)]
        _done, pending = await asyncio.wait(tasks, timeout=spec.duration_s + spec.drain_s + 0.5)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

        async def close(index: int) -> None:
            """The carrier's status callback once a call is over (refused, or the caller hung up on the
            challenge), unmeasured."""
            gate = spec.gates[index % len(spec.gates)]
            status = "busy" if index % 2 == 0 else "no-answer"
            form = {"CallSid": f"CA{spec.prefix}{index:08d}", "CallStatus": status, "CallDuration": "0"}
            with contextlib.suppress(TimeoutError, HttpError):
                path = urlsplit(gate["url"]).path + "/status"
                await http.request("POST", path, urlencode(form).encode(), form_headers)

        # As a carrier with a status callback does, and as the starts mode closes its calls: open calls
        # would have the sweep tick them in later runs.
        for index in range(len(arrivals)):
            await asyncio.sleep(1 / spec.close_rate)
            closing.add(asyncio.create_task(close(index)))
        await asyncio.gather(*closing)
    finally:
        http.close()
    return summarise(spec, samples, [], len(arrivals), error_bodies) | {"calls": len(arrivals)}


# The adapter mode's two streams, and the kinds of request each reports on.
NATIVE, ADAPTER = "native", "vapi"
STREAMS = (NATIVE, ADAPTER)
KINDS = ("start", "turn", "end")
VAPI_KINDS = {"status-update": "start", "speech-update": "turn", "end-of-call-report": "end"}
# What a 2xx answer of each kind holds by either route (the score's action, the live picture, the settled end);
# the adapter's lists it under `events`. A refusal inside a 200 (`error`) or a dropped event is no answer.
ANSWERS = {"start": b'"action"', "turn": b'"flags"', "end": b'"duration_s"'}


def answered(kind: str, payload: bytes) -> bool:
    return ANSWERS[kind] in payload and b'"error":' not in payload and b'"ignored":true' not in payload


@dataclass
class Route:
    """Where one call of the adapter mode posts: `POST /v1/events` with the account's key, or the account's
    Vapi token path, each request signed with its secret as it leaves."""

    stream: str
    path: str
    key: str = ""
    secret: str = ""

    def headers(self, body: bytes) -> bytes:
        if self.secret:
            return vapi_headers(self.secret, body, time.time())
        return f"Authorization: Bearer {self.key}\r\nContent-Type: application/json\r\n".encode()


@dataclass
class Planned:
    offset: float  # intended send time, seconds after t0
    kind: str  # start, turn or end
    body: bytes
    measured: bool


def plan_adapter(spec: Spec, wall0_ms: int) -> list[tuple[Route, list[Planned]]]:
    """Both streams' full calls. Each stream has its own Poisson arrivals at `rate`, dealt round-robin to a
    pool of concurrent calls as the `calls` mode deals them (a finished call is replaced by a new one); the
    calls' shapes come from one seed, so both streams make the same calls in the same order. A call is Vapi's
    messages (`traffic.vapi_call`): sent as they are, or as the bodies the Vapi parser makes of them."""
    slots = spec.concurrent_calls or max(20, int(spec.rate * 0.25))
    calls: list[tuple[Route, list[Planned]]] = []
    left_open: list[tuple[list[tuple[str, bytes]], list[Planned]]] = []
    for stream, accounts in ((NATIVE, spec.accounts), (ADAPTER, spec.adapter_accounts)):
        arrivals = poisson_arrivals(random.Random(f"{spec.seed} arrivals {stream}"), spec.rate, spec.duration_s)
        shapes = random.Random(f"{spec.seed} calls")
        active: list[tuple[list[tuple[str, bytes]], list[Planned]] | None] = [None] * slots
        serial = 0
        for i, t in enumerate(arrivals):
            slot = i % slots
            current = active[slot]
            if current is None:
                account, to = pick(accounts, spec.call_offset + serial)
                call_id = f"{spec.prefix}-{stream[0]}{serial}"
                messages = vapi_call(shapes, call_id, to, wall0_ms + int(t * 1000))
                events = [
                    (VAPI_KINDS[m["message"]["type"]], orjson.dumps(m if stream == ADAPTER else native_body(m)))
                    for m in messages
                ]
                if stream == ADAPTER:
                    ingest = spec.ingest[account.account_id]
                    route = Route(stream, f"/v1/ingest/vapi/{ingest['token']}", secret=ingest["secret"])
                else:
                    route = Route(stream, "/v1/events", key=account.key)
                current = (events, [])
                calls.append((route, current[1]))
                serial += 1
            events, scheduled = current
            kind, body = events[len(scheduled)]
            scheduled.append(Planned(t, kind, body, True))
            active[slot] = None if len(scheduled) == len(events) else current
        left_open += [current for current in active if current is not None]
    # Close what is still open, unmeasured, after the window: open calls would have the sweep tick them later.
    close_at = spec.duration_s + 0.5
    for n, (events, scheduled) in enumerate(left_open):
        kind, body = events[-1]
        scheduled.append(Planned(close_at + n / spec.close_rate, kind, body, False))
    return calls


async def drive_adapter(spec: Spec) -> dict[str, Any]:
    calls = plan_adapter(spec, int(time.time() * 1000) + 500)
    samples: list[Sample] = []
    unmeasured: list[Sample] = []
    error_bodies: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    unfinished: Counter[str] = Counter()
    http = Client(spec.base_url, spec.connections, REQUEST_TIMEOUT_S)
    try:
        await asyncio.gather(*(http.request("GET", "/healthz") for _ in range(min(32, spec.connections))))
        t0 = clock() + 0.5

        async def one_call(route: Route, events: list[Planned]) -> None:
            """As `drive` chains a call: each event at its time or once the one before was answered; where
            the start failed, its turns unsent and each an error at the start's time, its end sent unmeasured."""
            failed_at: float | None = None
            done = 0
            try:
                for event in events:
                    label = f"{route.stream} {event.kind}"
                    if failed_at is not None and event.kind != "end":
                        if event.measured:
                            skipped[route.stream] += 1
                            samples.append(Sample(label, failed_at, math.inf, 0, 0.0))
                        done += 1
                        continue
                    intended = t0 + event.offset
                    delay = intended - clock()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    sent = clock()
                    status = 0
                    try:
                        status, payload = await http.request("POST", route.path, event.body, route.headers(event.body))
                        if 200 <= status < 300 and not answered(event.kind, payload):
                            error_bodies[f"{label} unexpected {payload[:80].decode(errors='replace')}"] += 1
                            status = 0
                        elif status >= 300:
                            error_bodies[f"{label} {status} {payload[:80].decode(errors='replace')}"] += 1
                    except (TimeoutError, HttpError) as exc:
                        error_bodies[f"{label} {type(exc).__name__}"] += 1
                    latency = clock() - intended if status else math.inf
                    sample = Sample(label, event.offset, latency, status, sent - intended)
                    if failed_at is not None:
                        if event.measured:
                            skipped[route.stream] += 1
                            samples.append(Sample(label, failed_at, math.inf, 0, 0.0))
                        unmeasured.append(sample)
                    else:
                        (samples if event.measured else unmeasured).append(sample)
                    if event.kind == "start" and not 200 <= status < 300:
                        failed_at = event.offset
                    done += 1
            except asyncio.CancelledError:
                # Still unanswered at the end of the drain: this event and the rest, errors, infinitely slow.
                for event in events[done:]:
                    if event.measured:
                        unfinished[route.stream] += 1
                        at = event.offset if failed_at is None else failed_at
                        samples.append(Sample(f"{route.stream} {event.kind}", at, math.inf, 0, 0.0))
                raise

        tasks = [asyncio.create_task(one_call(route, events)) for route, events in calls]
        last = max((events[-1].offset for _, events in calls if events), default=0.0)
        _done, pending = await asyncio.wait(tasks, timeout=max(0.0, t0 + last - clock()) + spec.drain_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    finally:
        http.close()
    offered = sum(1 for _, events in calls for event in events if event.measured)
    window = [s for s in samples if s.intended >= spec.warmup_s]
    return summarise(spec, samples, unmeasured, offered, error_bodies) | {
        "by_stream": {stream: stats([s for s in window if s.kind.startswith(stream + " ")]) for stream in STREAMS},
        "calls": dict(Counter(route.stream for route, _ in calls)),
        "skipped_by_stream": dict(skipped),
        "unfinished_by_stream": dict(unfinished),
    }


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return math.nan
    rank = max(0, math.ceil(q / 100.0 * len(sorted_values)) - 1)
    return sorted_values[min(rank, len(sorted_values) - 1)]


def stats(samples: list[Sample]) -> dict[str, Any]:
    latencies = sorted(s.latency for s in samples)
    lags = sorted(s.send_lag for s in samples)
    ok = sum(1 for s in samples if 200 <= s.status < 300)
    statuses = Counter(str(s.status) for s in samples)

    def ms(value: float) -> float | None:
        return None if math.isinf(value) or math.isnan(value) else round(value * 1000, 2)

    return {
        "count": len(samples),
        "ok": ok,
        "errors": len(samples) - ok,
        "statuses": dict(statuses),
        "p50_ms": ms(percentile(latencies, 50)),
        "p90_ms": ms(percentile(latencies, 90)),
        "p99_ms": ms(percentile(latencies, 99)),
        "p999_ms": ms(percentile(latencies, 99.9)),
        "max_ms": ms(latencies[-1]) if latencies else None,
        "send_lag_p99_ms": ms(percentile(lags, 99)),
    }


def windows(samples: list[Sample], window_s: float, duration_s: float) -> list[dict[str, Any]]:
    """The statistics of each `window_s` of intended send times, the warm-up included."""
    count = math.ceil(duration_s / window_s)
    buckets: list[list[Sample]] = [[] for _ in range(count)]
    for sample in samples:
        buckets[min(count - 1, int(sample.intended // window_s))].append(sample)
    return [{"start_s": round(i * window_s, 1)} | stats(bucket) for i, bucket in enumerate(buckets)]


def summarise(
    spec: Spec, samples: list[Sample], unmeasured: list[Sample], offered: int, errors: Counter[str]
) -> dict[str, Any]:
    window = [s for s in samples if s.intended >= spec.warmup_s]
    seconds = max(1e-9, spec.duration_s - spec.warmup_s)
    result: dict[str, Any] = {
        "mode": spec.mode,
        "rate": spec.rate,
        "duration_s": spec.duration_s,
        "warmup_s": spec.warmup_s,
        "offered": offered,
        "answered": len(samples),
        "unfinished": offered - len(samples),
        "all": stats(window),
        "by_type": {kind: stats([s for s in window if s.kind == kind]) for kind in sorted({s.kind for s in window})},
        "throughput_ok_per_s": round(sum(1 for s in window if 200 <= s.status < 300) / seconds, 1),
        "unmeasured": stats(unmeasured),
        "error_samples": dict(errors.most_common(5)),
    }
    if spec.window_s > 0:
        result["windows"] = windows(samples, spec.window_s, spec.duration_s)
    # Requests never answered count against the tail: p99 is computed over everything offered.
    missing = offered - len(samples)
    if missing:
        result["all"]["errors"] += missing
        if missing > len(window) * 0.001:
            result["all"]["p999_ms"] = None
        if missing > len(window) * 0.01:
            result["all"]["p99_ms"] = None
    return result


async def in_process(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one load in a process of its own (so the generator does not share the caller's loop), in its
    own process group, killed if it outlives its arrivals by 90 s or the caller is cancelled."""
    with tempfile.TemporaryDirectory(prefix="loadgen-") as tmp:
        result_path = Path(tmp) / "result.json"
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.loadgen",
            str(result_path),
            stdin=asyncio.subprocess.PIPE,
            cwd=Path(__file__).resolve().parent.parent,
            start_new_session=True,
        )
        try:
            await asyncio.wait_for(process.communicate(orjson.dumps(spec)), float(spec["duration_s"]) + 90)
        finally:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, 9)
                await process.wait()
        if process.returncode != 0:
            raise RuntimeError(f"the load generator exited with status {process.returncode}")
        result: dict[str, Any] = orjson.loads(result_path.read_bytes())
        return result


class CollectorPauses:
    """The longest pause of the cyclic garbage collector in this process, as `gc.callbacks` see it."""

    def __init__(self) -> None:
        self.started = 0.0
        self.longest_ms = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self.started = time.perf_counter()
        else:
            self.longest_ms = max(self.longest_ms, (time.perf_counter() - self.started) * 1000)


async def keep_collector_young(interval_s: float = 1.0) -> None:
    """Collect the young generations, then move every survivor out of the collector's view.

    The plan and the samples live until the run ends. Left in view, each full collection walks all of
    them and holds this loop while it does: hundreds of thousands of objects into an overload run, a
    pause every request in flight waits out and the latencies charge to the service.
    """
    while True:
        await asyncio.sleep(interval_s)
        gc.collect(1)
        gc.freeze()


async def run(spec: Spec) -> dict[str, Any]:
    pauses = CollectorPauses()
    gc.callbacks.append(pauses)
    gc.freeze()
    young = asyncio.create_task(keep_collector_young())
    try:
        drivers = {"gate": drive_gate, "adapter": drive_adapter}
        result = await drivers.get(spec.mode, drive)(spec)
    finally:
        young.cancel()
    return result | {"loadgen_gc_max_pause_ms": round(pauses.longest_ms, 1)}


def main() -> None:
    spec = Spec.from_json(orjson.loads(sys.stdin.buffer.read()))
    result = uvloop.run(run(spec))
    Path(sys.argv[1]).write_bytes(orjson.dumps(result))


if __name__ == "__main__":
    main()
