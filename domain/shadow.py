"""A shadow run (decisions section 17): the log folded again with a candidate policy, beside the live one.

`ShadowRun` drives two in-memory replays of the folds (`domain.replay.Replay`) with the same records in
the same order. The live one folds every record as it was; the shadow one folds the same records except
that the target account's `call.started` events with `at` in [since, until) carry the candidate policy in
place of the one the edge stamped. Each such call is compared by the two `call.decided` facts its start
made. The live side is the replay's own, not the `call.decided` recorded on the decisions topic: both
sides then come from the same fold over the same state, so a flip is the policy's doing alone and never
the replay's distance from what the workers saw (two starts racing across workers, a barrier's timeout),
and the candidate's later effects (a rejected caller's `prior_bad` on its next call, the blocks and
patterns its facts place) stay in the shadow replay, where they belong.

`Tally` is the result's arithmetic: the flip matrix, the labels in each cell, the flipped calls and the
daily rates. Pure: time comes from the events.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from typing import Any

import msgspec

from domain import keys
from domain.calls import CallState
from domain.events import AnyEvent, CallStarted
from domain.facts import AnyFact, CallDecided
from domain.policy import Policy, policy_record, record_policy
from domain.replay import Partitioner, Replay
from domain.rules import Rules
from domain.times import format_ms, parse_ms

ACTIONS = ("allow", "review", "reject")
LABELS = ("spam", "good")
# The flipped calls a result carries whole; `?format=csv` gives every one.
FLIPPED_SHOWN = 1000
# A run's window at most (decisions section 17).
MAX_WINDOW_MS = 31 * 86_400_000

# The records on the shadow topic, all keyed by the run's account.
REQUESTED = "shadow.requested"
PROGRESS = "shadow.progress"
RESULT = "shadow.result"
DONE = "shadow.done"


class Request(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What `POST /v1/shadow` asked for, as the `shadow.requested` record carries it (times in ms)."""

    id: str
    account_id: str
    since: int
    until: int
    policy: Policy


def requested(request: Request, at: int) -> dict[str, Any]:
    """The `shadow.requested` record: times as ISO 8601, the policy in `parse_policy`'s shape."""
    return {
        "kind": REQUESTED,
        "id": request.id,
        "account_id": request.account_id,
        "since": format_ms(request.since),
        "until": format_ms(request.until),
        "policy": policy_record(request.policy),
        "at": format_ms(at),
    }


def request_of(record: dict[str, Any]) -> Request:
    """The request a `shadow.requested` record carries, checked when it was appended."""
    return Request(
        id=str(record["id"]),
        account_id=str(record["account_id"]),
        since=parse_ms(record["since"]) or 0,
        until=parse_ms(record["until"]) or 0,
        policy=record_policy(record["policy"]),
    )


class Side(msgspec.Struct, frozen=True, gc=False):
    action: str
    score: float
    reasons: tuple[str, ...]


class Compared(msgspec.Struct, frozen=True, gc=False):
    """One call of the window, answered by each policy; `label` is its standing label at the window's end."""

    call_id: str
    at: int
    live: Side
    shadow: Side
    label: str | None = None

    @property
    def flipped(self) -> bool:
        return self.live.action != self.shadow.action


def side_of(fact: CallDecided) -> Side:
    return Side(fact.answer.action, fact.answer.score, tuple(fact.answer.reasons))


class ShadowRun:
    """The live and the shadow replay of one request, fed the log's records in the order they were appended."""

    def __init__(self, request: Request, rules: Rules, partition: Partitioner) -> None:
        self.request = request
        self.live = Replay(rules, partition, keep=False)
        self.shadow = Replay(rules, partition, keep=False)
        # Each call once, by its first decision: a retried start answers the same again.
        self.compared: dict[str, Compared] = {}

    def targets(self, event: AnyEvent) -> bool:
        """A start the candidate decides: the account's, started inside the window."""
        r = self.request
        return isinstance(event, CallStarted) and event.account_id == r.account_id and r.since <= event.at < r.until

    def fold(self, event: AnyEvent, key: str | None = None) -> None:
        """One event; `key`, the record's key on the events topic, when it comes from the log."""
        forwards = key is None
        live = self.live.fold_event(event, key, forwards)
        if not self.targets(event):
            self.shadow.fold_event(event, key, forwards)
            return
        policy = None if self.request.policy.empty else self.request.policy
        shadow = self.shadow.fold_event(msgspec.structs.replace(event, policy=policy), key, forwards)
        if event.call_id in self.compared:
            return
        live_fact, shadow_fact = decided(live.facts, event.id), decided(shadow.facts, event.id)
        # A start refused (an unprotected number, the number limit) is no call; it is refused under both.
        if live_fact is not None and shadow_fact is not None:
            self.compared[event.call_id] = Compared(event.call_id, event.at, side_of(live_fact), side_of(shadow_fact))

    def apply(self, fact: AnyFact) -> None:
        """A fact no fold of the events makes (a number's tick, a removed number), into both replays."""
        self.live.record([fact], [])
        self.shadow.record([fact], [])

    def calls(self) -> int:
        return len(self.compared)

    def tally(self) -> Tally:
        """The comparison so far, each call with the label the live replay holds for it now."""
        tally = Tally()
        for compared in self.compared.values():
            state = self.live.calls.get(keys.call(self.request.account_id, compared.call_id))
            label = state.label if isinstance(state, CallState) else None
            tally.add(msgspec.structs.replace(compared, label=label))
        return tally


def decided(facts: Iterable[AnyFact | Any], event_id: str) -> CallDecided | None:
    return next((f for f in facts if isinstance(f, CallDecided) and f.id == event_id), None)


def _zeros() -> dict[str, dict[str, int]]:
    return {live: dict.fromkeys(ACTIONS, 0) for live in ACTIONS}


class Tally:
    """The result's arithmetic over the compared calls, added in any order."""

    def __init__(self) -> None:
        self.calls = 0
        self.matrix = _zeros()
        self.labels = {live: {shadow: dict.fromkeys(LABELS, 0) for shadow in ACTIONS} for live in ACTIONS}
        self.flipped: list[Compared] = []
        self.days: dict[str, dict[str, Any]] = {}

    def add(self, compared: Compared) -> None:
        live, shadow = compared.live.action, compared.shadow.action
        self.calls += 1
        self.matrix[live][shadow] += 1
        if compared.label in LABELS:
            self.labels[live][shadow][str(compared.label)] += 1
        if compared.flipped:
            self.flipped.append(compared)
        date = format_ms(compared.at)[:10]
        day = self.days.setdefault(
            date, {"date": date, "calls": 0, "live": dict.fromkeys(ACTIONS, 0), "shadow": dict.fromkeys(ACTIONS, 0)}
        )
        day["calls"] += 1
        day["live"][live] += 1
        day["shadow"][shadow] += 1

    def all_flipped(self) -> list[dict[str, Any]]:
        """Every flipped call, in the order they started."""
        ordered = sorted(self.flipped, key=lambda c: (c.at, c.call_id))
        return [flipped_body(c) for c in ordered]

    def summary(self) -> dict[str, Any]:
        """The result's body but its flipped calls."""
        return {
            "calls": self.calls,
            "matrix": self.matrix,
            "labels": self.labels,
            "daily": [self.days[date] for date in sorted(self.days)],
        }


def flipped_body(c: Compared) -> dict[str, Any]:
    def side(s: Side) -> dict[str, Any]:
        return {"action": s.action, "score": s.score, "reasons": list(s.reasons)}

    return {
        "call_id": c.call_id,
        "at": format_ms(c.at),
        "from": c.live.action,
        "to": c.shadow.action,
        "live": side(c.live),
        "shadow": side(c.shadow),
    }


def chunks(flipped: list[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    """The flipped calls in parts of `size`, so each `shadow.result` record stays under the broker's limit;
    there is always a first part, which carries the summary."""
    return [flipped[i : i + size] for i in range(0, len(flipped), size)] or [[]]


CSV_COLUMNS = ("call_id", "at", "from", "to", "live_score", "shadow_score", "live_reasons", "shadow_reasons")


def csv_of(flipped: Iterable[dict[str, Any]]) -> str:
    """Every flipped call as CSV, one row each; reasons joined by spaces."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for f in flipped:
        live, shadow = f["live"], f["shadow"]
        writer.writerow(
            (
                f["call_id"],
                f["at"],
                f["from"],
                f["to"],
                live["score"],
                shadow["score"],
                " ".join(live["reasons"]),
                " ".join(shadow["reasons"]),
            )
        )
    return out.getvalue()


class Run(msgspec.Struct, kw_only=True, gc=False):
    """One run as the shadow topic tells it so far."""

    id: str
    account_id: str
    # What it was asked for, as the `shadow.requested` record says: the dashboard shows it and applies it.
    since: str = ""
    until: str = ""
    policy: dict[str, Any] = {}
    done: bool = False
    progress: float = 0.0
    calls: int = 0
    summary: dict[str, Any] | None = None
    parts: dict[int, list[dict[str, Any]]] = {}

    def flipped(self) -> list[dict[str, Any]]:
        return [f for part in sorted(self.parts) for f in self.parts[part]]

    def body(self) -> dict[str, Any]:
        """`GET /v1/shadow/<id>`: its progress while running, its whole result once done."""
        head: dict[str, Any] = {"id": self.id, "state": "done" if self.done else "running", "progress": self.progress}
        if not self.done or self.summary is None:
            empty = Tally().summary()
            return {**head, **empty, "calls": self.calls, "flipped": []}
        return {**head, **self.summary, "flipped": self.flipped()[:FLIPPED_SHOWN]}


class ShadowView:
    """The fold of the shadow topic: every run's latest state, and which account has one running."""

    def __init__(self) -> None:
        self.runs: dict[str, Run] = {}

    def apply(self, record: dict[str, Any]) -> None:
        kind, run_id = record.get("kind"), str(record.get("id"))
        if kind == REQUESTED:
            asked = Run(
                id=run_id,
                account_id=str(record["account_id"]),
                since=str(record["since"]),
                until=str(record["until"]),
                policy=dict(record["policy"]),
            )
            self.runs.setdefault(run_id, asked)
            return
        run = self.runs.get(run_id)
        if run is None:
            return
        if kind == PROGRESS:
            run.progress, run.calls = float(record["progress"]), int(record["calls"])
        elif kind == RESULT:
            if record["part"] == 0:
                run.summary = dict(record["summary"])
            run.parts[int(record["part"])] = list(record["flipped"])
        elif kind == DONE:
            run.done, run.progress = True, 1.0

    def of(self, account_id: str, run_id: str) -> Run | None:
        """The account's run by id; another account's is none of its business."""
        run = self.runs.get(run_id)
        return run if run is not None and run.account_id == account_id else None

    def running(self, account_id: str) -> Run | None:
        return next((r for r in self.runs.values() if r.account_id == account_id and not r.done), None)

    def latest(self, account_id: str) -> Run | None:
        """The account's latest run: the dashboard shows it."""
        return next((r for r in reversed(self.runs.values()) if r.account_id == account_id), None)
