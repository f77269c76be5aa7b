"""The feature view: per-account, per-number and per-caller facts that a start's score reads.

It is the fold of the decisions topic (facts: `call.decided`, `call.settled`). Every worker keeps
a full copy; the worker that decides applies its own fact at once (read-your-writes) and again
when its mirror reads it back, so every apply is idempotent and order-independent (counters,
sets, maxima by event time, top-N by time).
"""

from __future__ import annotations

from typing import Any

from processors.scoring import History, Last
from processors.store import Store

WINDOW_KEEP = 64
HOUR_MS = 3_600_000
DAY_MS = 86_400_000
BUCKET_DAYS = 8


class FeatureView:
    def __init__(self, store: Store) -> None:
        self.store = store

    # Reads.
    def decision(self, account: str, call_id: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self.store.get(f"dec|{account}|{call_id}")
        return found

    def numbers(self, account: str) -> dict[str, int]:
        return self.store.get(f"nums|{account}") or {}

    def scored_on(self, account: str, day_ms: int) -> int:
        return int(self.store.get(f"day|{account}|{day_ms}") or 0)

    def caller_calls(self, account: str, number: str, caller: str, since_ms: int, until_ms: int) -> int:
        times = self.store.get(f"cw|{account}|{number}|{caller}") or []
        return sum(1 for t in times if since_ms < t <= until_ms)

    def history(self, caller: str) -> History:
        h = self.store.get(f"hist|{caller}")
        if not h:
            return History()
        return History(
            calls=h["calls"],
            good=h["good"],
            bad=h["bad"],
            points=h.get("points", 0),
            last_settled=Last(**h["settled"]) if h.get("settled") else None,
            last_start=Last(**h["start"]) if h.get("start") else None,
        )

    def network_accounts(self, caller: str) -> int:
        return len(self.store.get(f"accts|{caller}") or [])

    def provider_alias(self, account: str, provider_call_id: str) -> str | None:
        found: str | None = self.store.get(f"pcid|{account}|{provider_call_id}")
        return found

    def hourly(self, account: str, number: str) -> dict[str, int]:
        return self.store.get(f"hours|{account}|{number}") or {}

    def block(self, account: str, number: str, caller: str, at: int) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self.store.get(f"block|{account}|{number}|{caller}")
        return found if found is not None and found["since"] <= at < found["until"] else None

    def patterns(self, account: str, number: str, at: int) -> list[dict[str, Any]]:
        return [p for p in self.store.get(f"pat|{account}|{number}") or [] if p["since"] <= at < p["until"]]

    def refusal(self, event_id: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self.store.get(f"ref|{event_id}")
        return found

    def delivery(self, alert_id: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self.store.get(f"dlv|{alert_id}")
        return found

    def first_seen(self, caller: str) -> int | None:
        found = self.store.get(f"hist|{caller}")
        return None if not found else found.get("first")

    # Folds.
    def apply(self, fact: dict[str, Any]) -> bool:
        """Fold one fact; False when it was already applied."""
        if fact["kind"] == "call.decided":
            return self._decided(fact)
        if fact["kind"] == "call.settled":
            return self._settled(fact)
        if fact["kind"] == "call.refused":
            return self._refused(fact)
        if fact["kind"] == "block.placed":
            return self._block(fact)
        if fact["kind"] == "pattern.active":
            return self._pattern(fact)
        if fact["kind"].startswith("delivery."):
            return self._delivery(fact)
        return False

    def _delivery(self, fact: dict[str, Any]) -> bool:
        """The latest word on an alert's webhook: skipped, attempted, then its outcome."""
        key = f"dlv|{fact['alert_id']}"
        known = self.store.get(key)
        if known is not None and known["kind"] == "delivery.outcome":
            return False
        self.store.put(key, {k: fact.get(k) for k in ("kind", "delivered", "status", "error", "duration_ms", "reason")})
        return True

    def _refused(self, fact: dict[str, Any]) -> bool:
        key = f"ref|{fact['id']}"
        if self.store.get(key) is not None:
            return False
        self.store.put(key, {"status": fact["status"], "body": fact["body"]})
        return True

    def _block(self, fact: dict[str, Any]) -> bool:
        key = f"block|{fact['account_id']}|{fact['number']}|{fact['caller']}"
        block = {"reason": fact["reason"], "alert_id": fact["alert_id"], "since": fact["since"], "until": fact["until"]}
        existing = self.store.get(key)
        if existing is not None and existing["until"] >= block["until"]:
            return False
        self.store.put(key, block)
        return True

    def _pattern(self, fact: dict[str, Any]) -> bool:
        key = f"pat|{fact['account_id']}|{fact['number']}"
        active = [p for p in self.store.get(key) or [] if p["until"] > fact["since"]]
        entry = {"kind": fact["pattern"], "match": fact["match"], "since": fact["since"], "until": fact["until"]}
        if fact.get("width") is not None:
            entry["width"] = fact["width"]
        if entry in active:
            return False
        self.store.put(key, sorted([*active, entry], key=lambda p: (p["until"], p["kind"], p["match"])))
        return True

    def _decided(self, fact: dict[str, Any]) -> bool:
        account, call_id = fact["account_id"], fact["call_id"]
        key = f"dec|{account}|{call_id}"
        if self.store.get(key) is not None:
            return False
        self.store.put(key, fact)
        number, caller, at = fact["number"], fact["caller"], fact["at"]
        numbers = self.numbers(account)
        if number not in numbers or at < numbers[number]:
            numbers[number] = at
            self.store.put(f"nums|{account}", numbers)
        if fact.get("provider_call_id"):
            self.store.put(f"pcid|{account}|{fact['provider_call_id']}", call_id)
        if not fact["answer"].get("capped"):
            day = f"day|{account}|{at - at % DAY_MS}"
            self.store.put(day, int(self.store.get(day) or 0) + 1)
        window = f"cw|{account}|{number}|{caller}"
        times = sorted([*(self.store.get(window) or []), at])[-WINDOW_KEEP:]
        self.store.put(window, times)
        hours = self.hourly(account, number)
        bucket = str(at - at % HOUR_MS)
        hours[bucket] = hours.get(bucket, 0) + 1
        newest = max(int(h) for h in hours)
        self.store.put(
            f"hours|{account}|{number}",
            {h: n for h, n in hours.items() if int(h) > newest - BUCKET_DAYS * DAY_MS},
        )
        h = self._raw_history(caller)
        h["calls"] += 1
        h["first"] = at if h.get("first") is None else min(h["first"], at)
        if "score" in fact["answer"] and not fact["answer"].get("capped"):
            start = {"score": round(fact["answer"]["score"] * 100), "at": at}
            if h.get("start") is None or start["at"] >= h["start"]["at"]:
                h["start"] = start
        self.store.put(f"hist|{caller}", h)
        accounts = self.store.get(f"accts|{caller}") or []
        if account not in accounts:
            self.store.put(f"accts|{caller}", sorted([*accounts, account]))
        return True

    def _settled(self, fact: dict[str, Any]) -> bool:
        key = f"set|{fact['account_id']}|{fact['call_id']}"
        if self.store.get(key) is not None:
            return False
        self.store.put(key, 1)
        spam = fact.get("spam_score")
        if spam is None:
            return True
        h = self._raw_history(fact["caller"])
        if spam < 30:
            h["good"] += 1
        if spam >= 70:
            h["bad"] += 1
        settled = {"score": int(spam), "at": fact["at"]}
        if h.get("settled") is None or settled["at"] >= h["settled"]["at"]:
            h["settled"] = settled
        self.store.put(f"hist|{fact['caller']}", h)
        return True

    def _raw_history(self, caller: str) -> dict[str, Any]:
        found: dict[str, Any] | None = self.store.get(f"hist|{caller}")
        return found or {"calls": 0, "good": 0, "bad": 0, "points": 0, "settled": None, "start": None, "first": None}
