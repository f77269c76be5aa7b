"""The per-call fold: the call record's lifecycle (interface section 3) as pure functions.

`handle` takes the call's current state, the event record and the features it may read, and
returns what the agent must do: the new state, the facts to append, and the answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from callscreen.plans import PlanLimits
from callscreen.times import format_ms
from processors.alerts import make_alert
from processors.detectors import pattern_matches
from processors.features import FeatureView
from processors.live import ALERT_LEVEL, LiveThresholds, picture
from processors.policy import Policy
from processors.scoring import Signals, score_start, settle_spam_score

DAY_MS = 86_400_000
DEFAULT_LIVE = LiveThresholds()
NOT_ANSWERED = {"busy", "no-answer", "failed", "canceled"}


@dataclass
class Outcome:
    status: int
    body: dict[str, Any]
    state: dict[str, Any] | None = None
    facts: list[dict[str, Any]] = field(default_factory=list)
    alerts: list[dict[str, Any]] = field(default_factory=list)


def handle(
    state: dict[str, Any] | None,
    record: dict[str, Any],
    view: FeatureView,
    policy: Policy,
    limits: PlanLimits,
    live: LiveThresholds = DEFAULT_LIVE,
    max_turns: int = 3000,
    long_call_min: int = 30,
) -> Outcome:
    kind = record["type"]
    if kind == "call.started":
        return start(state, record, view, policy, limits)
    if state is None:
        return Outcome(404, {"error": "unknown_call"})
    if kind == "call.ended":
        return end(state, record)
    outcome = turn(state, record, live, max_turns)
    if outcome.state is not None:
        alert = long_running_alert(outcome.state, record["at"], long_call_min)
        if alert is not None:
            outcome.alerts.append(alert)
    return outcome


def alias_target(state: dict[str, Any] | None, record: dict[str, Any], view: FeatureView) -> str | None:
    """The call this event belongs to when it names the call by its provider id."""
    if state is not None and state.get("alias_of"):
        return str(state["alias_of"])
    if state is not None:
        return None
    account = record["account_id"]
    for candidate in (record["call_id"], record.get("provider_call_id")):
        if candidate:
            target = view.provider_alias(account, candidate)
            if target and target != record["call_id"]:
                return target
    return None


def start(
    state: dict[str, Any] | None,
    record: dict[str, Any],
    view: FeatureView,
    policy: Policy,
    limits: PlanLimits,
) -> Outcome:
    account, call_id = record["account_id"], record["call_id"]
    if state is not None and not state.get("alias_of"):
        return Outcome(200, {**state["answer"], "duplicate": True})
    decided = view.decision(account, call_id)
    if decided is not None:
        # Decided before (a replay, or a crash between the fact and the table write): rebuild the
        # record from the fact, never re-decide; appending the fact again is a no-op for every fold.
        first = decided["answer"]
        return Outcome(200, {**first, "duplicate": True}, state=new_call(record, first), facts=[decided])
    refused = view.refusal(record["id"])
    if refused is not None:
        # Refused before (a replay, or a crash before the fact landed): the same answer and, again, its fact.
        return refuse(record, refused["status"], refused["body"])
    number, at = record["number"], record["at"]
    numbers = view.numbers(account)
    created = number not in numbers
    if created and not record["register"]:
        return refuse(record, 409, {"error": "not_protected"})
    if created and len(numbers) >= limits.numbers:
        return refuse(record, 402, {"error": "number_limit", "cap": limits.numbers})
    day = at - at % DAY_MS
    used = view.scored_on(account, day)
    if used >= limits.daily_starts:
        answer: dict[str, Any] = {
            "call_id": call_id,
            "score": 0.0,
            "action": "allow",
            "thresholds": {"review": policy.review, "reject": policy.reject},
            "reasons": ["capped"],
            "block": None,
            "checks": {},
            "prior": None,
            "capped": True,
            "cap": {"allowance": limits.daily_starts, "used": used, "resets_at": format_ms(day + DAY_MS)},
        }
    else:
        answer = {"call_id": call_id, **score_start(signals(record, view, policy), policy)}
    fact = {
        "kind": "call.decided",
        "id": record["id"],
        "account_id": account,
        "call_id": call_id,
        "number": number,
        "caller": record["caller"],
        "caller_country": record["caller_info"]["country"],
        "caller_first_at": view.first_seen(record["caller"]),
        "geo": (record.get("attrs") or {}).get("geo") or None,
        "cost": record.get("cost"),
        "direction": record["direction"],
        "provider_call_id": record.get("provider_call_id"),
        "quiet": record["quiet"],
        "at": at,
        "number_created": created,
        "answer": answer,
    }
    return Outcome(200, answer, state=new_call(record, answer), facts=[fact])


def refuse(record: dict[str, Any], status: int, body: dict[str, Any]) -> Outcome:
    """A refused start is a fact too: a replay must refuse it again whatever came after it."""
    fact = {
        "kind": "call.refused",
        "id": record["id"],
        "account_id": record["account_id"],
        "call_id": record["call_id"],
        "number": record["number"],
        "at": record["at"],
        "status": status,
        "body": body,
    }
    return Outcome(status, body, facts=[fact])


def signals(record: dict[str, Any], view: FeatureView, policy: Policy) -> Signals:
    account, number, caller, at = record["account_id"], record["number"], record["caller"], record["at"]
    caller_info, number_info = record["caller_info"], record["number_info"]
    attrs = record.get("attrs") or {}
    earlier = view.caller_calls(account, number, caller, at - policy.rate_window_ms, at)
    history = view.history(caller)
    zip_code = (attrs.get("geo") or {}).get("zip") if isinstance(attrs.get("geo"), dict) else None
    patterns = frozenset(
        p["kind"]
        for p in view.patterns(account, number, at)
        if pattern_matches(p, caller, caller_info["country"], zip_code)
    )
    block = view.block(account, number, caller, at)
    digits = policy.neighbor_digits
    neighbor = (
        caller != number
        and caller_info["country"] == number_info["country"]
        and caller_info["national"][:digits] == number_info["national"][:digits]
    )
    return Signals(
        at=at,
        trusted=bool(record.get("trusted")),
        attestation=attrs.get("attestation"),
        caller_valid=caller_info["valid"],
        self_call=caller == number,
        neighbor=neighbor,
        premium=caller_info["premium"],
        forwarded=bool(attrs.get("forwarded_from")),
        caller_calls_10m=earlier + 1,
        patterns=patterns,
        block=None if block is None else public_block(block),
        history=history,
        checks={
            "caller_calls_10m": earlier + 1,
            "network_calls": history.calls,
            "network_accounts": view.network_accounts(caller),
        },
    )


def public_block(block: dict[str, Any]) -> dict[str, Any]:
    return {
        "reason": block["reason"],
        "alert_id": block["alert_id"],
        "since": format_ms(block["since"]),
        "until": format_ms(block["until"]),
    }


def new_call(record: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    return {
        "account_id": record["account_id"],
        "call_id": record["call_id"],
        "provider_call_id": record.get("provider_call_id"),
        "to": record["to"],
        "from": record["from"],
        "number": record["number"],
        "caller": record["caller"],
        "direction": record["direction"],
        "plan": record["plan"],
        "started_at": record["at"],
        "ended_at": None,
        "reason": None,
        "source": record["source"],
        "cost": record.get("cost"),
        "cost_breakdown": record.get("cost_breakdown"),
        "attrs": record.get("attrs") or {},
        "quiet": record["quiet"],
        "state": "open",
        "score": answer["score"],
        "action": answer["action"],
        "capped": bool(answer.get("capped")),
        "spam_score": None if answer.get("capped") else round(answer["score"] * 100),
        "reasons": list(answer["reasons"]),
        "answer": answer,
        "live": new_live(),
    }


def new_live() -> dict[str, Any]:
    return {
        "events": [],
        "flags": [],
        "score": 0.0,
        "user_turns": 0,
        "agent_turns": 0,
        "interruptions": 0,
        "user_talk_s": 0.0,
        "agent_talk_s": 0.0,
        "suspicious_raised": False,
    }


def merge_cost(call: dict[str, Any], record: dict[str, Any]) -> None:
    """The larger total is kept; a platform breakdown replaces, a carrier's price only fills gaps."""
    cost = record.get("cost")
    if cost is not None and (call["cost"] is None or cost > call["cost"]):
        call["cost"] = cost
    breakdown = record.get("cost_breakdown")
    if not breakdown:
        return
    if set(breakdown) - {"carrier"}:
        call["cost_breakdown"] = dict(breakdown)
    else:
        existing = dict(call["cost_breakdown"] or {})
        for part, amount in breakdown.items():
            existing.setdefault(part, amount)
        call["cost_breakdown"] = existing


def end(state: dict[str, Any], record: dict[str, Any]) -> Outcome:
    call = dict(state)
    if call["state"] == "ended":
        # The same end folded again (a crash before its fact landed) appends the fact again, a no-op for
        # every fold that has it; any other end of an ended call is only a duplicate.
        facts = [settled_fact(call)] if call.get("end_id") == record["id"] else []
        return Outcome(
            200,
            {
                "call_id": call["call_id"],
                "duration_s": call["duration_s"],
                "spam_score": call["spam_score"],
                "duplicate": True,
            },
            facts=facts,
        )
    merge_cost(call, record)
    call["attrs"] = {**call["attrs"], **(record.get("attrs") or {})}
    call["ended_at"] = record["at"]
    call["end_id"] = record["id"]
    call["reason"] = record["reason"]
    call["state"] = "ended"
    duration = max(0, round((record["at"] - call["started_at"]) / 1000))
    call["duration_s"] = duration
    call["spam_score"] = live_spam_score(call, duration, record["reason"])
    body = {"call_id": call["call_id"], "duration_s": duration, "spam_score": call["spam_score"]}
    return Outcome(200, body, state=call, facts=[settled_fact(call)])


def settled_fact(call: dict[str, Any]) -> dict[str, Any]:
    """The fact of an ended call's settled score, identified by the end event that settled it."""
    return {
        "kind": "call.settled",
        "id": call["end_id"],
        "account_id": call["account_id"],
        "call_id": call["call_id"],
        "number": call["number"],
        "caller": call["caller"],
        "at": call["ended_at"],
        "duration_s": call["duration_s"],
        "spam_score": call["spam_score"],
        "cost": call["cost"],
        "quiet": call["quiet"],
    }


LIVE_FIELDS = ("role", "turn", "chars", "words", "hash", "interrupted")


def turn(state: dict[str, Any], record: dict[str, Any], rules: LiveThresholds, max_turns: int) -> Outcome:
    """A turn-type event or a sweep tick: place it by `at`, recompute the live picture."""
    call = dict(state)
    live = dict(call["live"])
    if record["type"] != "tick" and record.get("plan") != "guard":
        return Outcome(200, {**live_body(call), "ignored": True, "why": "live_monitor_is_guard"})
    if any(e["id"] == record["id"] for e in live["events"]):
        return Outcome(200, live_body(call))
    if record["type"] != "tick" and written_turns(live) >= max_turns:
        return Outcome(200, {**live_body(call), "ignored": True, "why": "call_turn_cap"})
    kept = {"id": record["id"], "type": record["type"], "at": record["at"]}
    kept.update({k: record[k] for k in LIVE_FIELDS if k in record})
    live["events"] = [*live["events"], kept]
    pic = picture(live["events"], call["started_at"], 0.0 if call["capped"] else call["score"], rules)
    live.update(
        flags=pic.flags,
        score=pic.score,
        user_turns=pic.user_turns,
        agent_turns=pic.agent_turns,
        interruptions=pic.interruptions,
        user_talk_s=round(pic.user_talk_s, 3),
        agent_talk_s=round(pic.agent_talk_s, 3),
    )
    call["live"] = live
    call["spam_score"] = live_spam_score(call)
    alerts = []
    if pic.first_alert_at is not None and not live["suspicious_raised"] and not call["quiet"]:
        live["suspicious_raised"] = True
        alerts.append(suspicious_alert(call, pic.first_alert_at))
    return Outcome(200, live_body(call), state=call, alerts=alerts)


def sweep_due(call: dict[str, Any], rules: LiveThresholds, long_call_min: int) -> int | None:
    """When a sweep must look at this call again: silence or length can raise with no further event."""
    if call["state"] != "open":
        return None
    live = call["live"]
    due = []
    if not live.get("long_running_raised"):
        due.append(call["started_at"] + long_call_min * 60_000)
    silent = call["plan"] == "guard" and "silent_listener" not in live["flags"]
    if silent and live["agent_turns"] > 0 and live["user_turns"] == 0:
        due.append(int(call["started_at"] + rules.silent_s * 1000))
    return min(due) if due else None


def long_running_alert(call: dict[str, Any], at: int, ceiling_min: int) -> dict[str, Any] | None:
    """`call.long_running` once per call, when an event or a sweep tick finds it open past the ceiling."""
    live = call["live"]
    if call["state"] != "open" or live.get("long_running_raised") or at - call["started_at"] < ceiling_min * 60_000:
        return None
    live["long_running_raised"] = True
    if call["quiet"]:
        return None
    data: dict[str, Any] = {
        "number": call["number"],
        "caller": call["caller"],
        "call_id": call["call_id"],
        "started_at": format_ms(call["started_at"]),
        "minutes": (at - call["started_at"]) // 60_000,
        "ceiling_min": ceiling_min,
    }
    if call["direction"] == "outbound":
        data["direction"] = "outbound"
    return make_alert(call["account_id"], "call.long_running", call["call_id"], call["started_at"], at, data)


def written_turns(live: dict[str, Any]) -> int:
    return sum(1 for e in live["events"] if e["type"] != "tick")


def live_spam_score(call: dict[str, Any], duration_s: int | None = None, reason: str | None = None) -> int | None:
    live = call["live"]
    at_end = reason is not None
    return settle_spam_score(
        start_score=None if call["capped"] else call["score"],
        live_score=live["score"],
        duration_s=duration_s or 0,
        answered=at_end and reason not in NOT_ANSWERED,
        machine_inbound=at_end
        and call["direction"] == "inbound"
        and call["attrs"].get("answered_by") == "machine_start",
        flags=live["flags"],
        two_sided=live["user_turns"] >= 2 and live["agent_turns"] >= 2,
    )


def suspicious_alert(call: dict[str, Any], at: int) -> dict[str, Any]:
    live = call["live"]
    data = {
        "number": call["number"],
        "caller": call["caller"],
        "call_id": call["call_id"],
        "flags": [f for f in live["flags"] if f in ALERT_LEVEL] + [f for f in live["flags"] if f not in ALERT_LEVEL],
        "score": live["score"],
        "seconds": max(0, (at - call["started_at"]) // 1000),
    }
    if call["direction"] == "outbound":
        data["direction"] = "outbound"
    return make_alert(call["account_id"], "call.suspicious", call["call_id"], call["started_at"], at, data)


def call_reasons(call: dict[str, Any]) -> list[str]:
    """The start's reasons, then each live flag as `live_<flag>`."""
    return [*call["reasons"], *(f"live_{flag}" for flag in call["live"]["flags"])]


def live_body(call: dict[str, Any]) -> dict[str, Any]:
    live = call["live"]
    return {
        "flags": live["flags"],
        "score": live["score"],
        "spam_score": call["spam_score"],
        "user_turns": live["user_turns"],
        "agent_turns": live["agent_turns"],
        "interruptions": live["interruptions"],
    }
