"""Read-only questions the edge asks the workers, answered from the tables and the feature view.

Each question arrives on the queries topic in the partition of the state it reads; `now` comes
from the edge, so nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from callscreen.plans import plan_limits
from callscreen.settings import Settings
from callscreen.times import format_ms
from processors import call_index, calls
from processors.features import HOUR_MS, FeatureView
from processors.policy import Policy
from processors.scoring import score_start

Lookup = Callable[[str], Any]


def answer(
    record: dict[str, Any],
    partition: int,
    view: FeatureView,
    call_of: Lookup,
    index_of: Lookup,
    alert_of: Lookup,
    settings: Settings,
    policy: Policy,
) -> tuple[int, dict[str, Any]]:
    kind = record.get("q")
    account = str(record.get("account_id"))
    if kind == "account.usage":
        return 200, {"numbers": len(view.numbers(account)), "scored_today": view.scored_on(account, int(record["day"]))}
    if kind == "call.get":
        call = call_of(f"{account}:{record['call_id']}")
        if call is not None and call.get("alias_of"):
            return 200, {"alias_of": call["alias_of"]}
        if call is None:
            target = view.provider_alias(account, record["call_id"])
            return (200, {"alias_of": target}) if target else (404, {"error": "not_found"})
        return 200, public_call(call)
    if kind == "calls.list":
        return 200, list_calls(record, account, partition, call_of, index_of)
    if kind == "numbers":
        return 200, numbers(view, account, int(record["now"]), plan_limits(settings, record["plan"]).numbers)
    if kind == "score":
        return 200, score_only(record, view, policy)
    if kind == "reputation":
        return 200, reputation(view, record["number"], int(record["now"]))
    if kind == "alert.get":
        alert = alert_of(f"alert|{account}|{record['alert_id']}")
        return (200, public_alert(alert, view)) if alert is not None else (404, {"error": "not_found"})
    if kind == "alerts.list":
        return 200, list_alerts(record, account, partition, alert_of, view)
    return 400, {"error": "unknown_query"}


def public_call(call: dict[str, Any]) -> dict[str, Any]:
    """The call record of interface section 2 with its live picture (decisions.md section 6)."""
    live = call["live"]
    return {
        "call_id": call["call_id"],
        "provider_call_id": call["provider_call_id"],
        "to": call["to"],
        "from": call["from"],
        "direction": call["direction"],
        "at": format_ms(call["started_at"]),
        "ended_at": format_ms(call["ended_at"]) if call["ended_at"] is not None else None,
        "duration_s": call.get("duration_s"),
        "reason": call["reason"],
        "source": call["source"],
        "cost": call["cost"],
        "cost_breakdown": call["cost_breakdown"],
        "attrs": call["attrs"],
        "score": call["score"],
        "action": call["action"],
        "spam_score": call["spam_score"],
        "reasons": calls.call_reasons(call),
        "state": call["state"],
        "flags": live["flags"],
        "user_turns": live["user_turns"],
        "agent_turns": live["agent_turns"],
        "interruptions": live["interruptions"],
    }


def list_calls(
    record: dict[str, Any], account: str, partition: int, call_of: Lookup, index_of: Lookup
) -> dict[str, Any]:
    after = call_index.decode_cursor(record["cursor"]) if record.get("cursor") else None
    wanted = call_index.Filter(
        number=record.get("number"),
        since=record.get("since"),
        until=record.get("until"),
        action=record.get("action"),
        after=after,
    )
    limit = int(record["limit"])
    found: list[call_index.Entry] = []
    for bucket, entries in call_index.newest_first(index_of, account, partition):
        if wanted.until is not None and bucket >= wanted.until:
            continue
        if wanted.since is not None and bucket + call_index.BUCKET_MS <= wanted.since:
            break
        found.extend(e for e in entries if wanted.matches(e))
        if len(found) > limit:
            break
    found.sort(key=call_index.sort_key, reverse=True)
    page = found[: limit + 1]
    return {"entries": page, "calls": {e[1]: public_call(call_of(f"{account}:{e[1]}")) for e in page[:limit]}}


def public_alert(alert: dict[str, Any], view: FeatureView) -> dict[str, Any]:
    """The envelope of interface section 2, with the delivery outcome joined in."""
    envelope = {k: alert[k] for k in ("id", "type", "account_id", "created_at", "data")}
    delivery = view.delivery(alert["id"])
    detail = None
    if delivery is not None and delivery["kind"] == "delivery.outcome":
        detail = {k: delivery[k] for k in ("status", "error", "duration_ms")}
    return {
        **envelope,
        "severity": alert["severity"],
        "delivered": {"webhook": bool(delivery and delivery["delivered"])},
        "delivery": detail,
    }


def list_alerts(
    record: dict[str, Any], account: str, partition: int, alert_of: Lookup, view: FeatureView
) -> dict[str, Any]:
    after = call_index.decode_cursor(record["cursor"]) if record.get("cursor") else None
    since, kind, limit = record.get("since"), record.get("type"), int(record["limit"])
    found: list[call_index.Entry] = []
    for bucket, entries in call_index.newest_first(alert_of, account, partition, "alerts"):
        if since is not None and bucket + call_index.BUCKET_MS <= since:
            break
        for entry in entries:
            created, alert_id, alert_type = entry
            if since is not None and created < since:
                continue
            if kind is not None and alert_type != kind:
                continue
            if after is not None and (created, alert_id) >= after:
                continue
            found.append(entry)
        if len(found) > limit:
            break
    found.sort(key=call_index.sort_key, reverse=True)
    page = found[: limit + 1]
    alerts = {e[1]: public_alert(alert_of(f"alert|{account}|{e[1]}"), view) for e in page[:limit]}
    return {"entries": page, "alerts": alerts}


def numbers(view: FeatureView, account: str, now: int, cap: int) -> dict[str, Any]:
    data = []
    for number, created in sorted(view.numbers(account).items(), key=lambda kv: (kv[1], kv[0])):
        hours = view.hourly(account, number)
        recent = sum(n for hour, n in hours.items() if int(hour) > now - 24 * HOUR_MS - HOUR_MS and int(hour) <= now)
        data.append({"number": number, "created_at": format_ms(created), "calls_24h": recent})
    return {"data": data, "cap": cap}


def score_only(record: dict[str, Any], view: FeatureView, policy: Policy) -> dict[str, Any]:
    """The score a start would get now, computed and not recorded."""
    return score_start(calls.signals(record, view, policy), policy)


def reputation(view: FeatureView, number: str, now: int) -> dict[str, Any]:
    """Network-wide aggregates for a number: never an account id or a call."""
    history = view.history(number)
    last = history.last
    score = 0.0
    if last is not None:
        score = round(last.score / 100, 4)
    flags = ["prior_bad"] if history.bad else []
    return {
        "number": number,
        "score": score,
        "calls": history.calls,
        "good": history.good,
        "accounts": view.network_accounts(number),
        "last": None if last is None else {"score": last.score, "days": max(0, (now - last.at) // 86_400_000)},
        "flags": flags,
    }
