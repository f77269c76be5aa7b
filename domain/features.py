"""The feature view: per-account, per-number and per-caller facts that a start's score reads.

It is the fold of the decisions and deliveries topics, kept in a `Store`. Every worker keeps a
full copy, written by one writer, the facts mirror; a fold that needs its own facts applied waits
for the mirror (docs/architecture.md, "The barrier"). Every apply is idempotent and
order-independent (counters by fact id, sets, maxima by event time), so a fact appended twice
counts once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import msgspec

from domain import keys, labels
from domain.calls import NOT_ANSWERED, CallState, StartContext, Stored
from domain.detectors import pattern_matches
from domain.events import KEY_CREDENTIAL, AnyEvent, CallStarted
from domain.facts import (
    AnyDelivery,
    BlockPlaced,
    CallDecided,
    CallLabelled,
    CallRefused,
    CallSettled,
    ChannelAttempt,
    ChannelOutcome,
    ChannelSkipped,
    DeliveryOutcome,
    Fact,
    HangUpAttempt,
    HangUpOutcome,
    NumberRemoved,
    PatternActive,
    PointsCharged,
    PublicBlock,
)
from domain.labels import Mark
from domain.outbound import SETTINGS_REASONS
from domain.phone import parse_number
from domain.rules import DAY_MS, HOUR_MS, Rules, ScoringRules
from domain.scoring import CallerView, History, Last, agreed, one_ring, prior_bad
from domain.store import Store
from domain.times import day_start_ms, format_ms

K = keys.View
WINDOW_KEEP = 64
# A number's hourly counts answer `calls_24h` (GET /v1/numbers); two days of them leave a margin, and keep a
# busy number's value, read and rewritten by each of its starts, at 48 counts.
BUCKET_DAYS = 2
PATTERNS_KEEP = 64
# An account's outbound starts kept for the burst window: far more than its threshold, and a bound on the value
# every outbound start of the account reads and rewrites.
OUTBOUND_KEEP = 256
# A caller's latest one-ring ends kept per account: one in the window is all the signal needs.
ONE_RINGS_KEEP = 8
# An account's own history of a caller keeps, beside it, the part its API keys posted once a path token has
# posted too (without it, all of the history is its keys'): what its network agreement counts in full
# (docs/rules.md, Network evidence). Only what `_agreement` reads and the folds into it write is kept there.
KEYED = "keyed"
KEYED_FIELDS = ("calls", "good", "bad", "above", "settled", "start", "first", labels.LABEL_COUNTS)
# A caller's history counts, beside it, the accounts with a call of it labelled spam and good: each account
# once per caller and label (GET /v1/reputation, `labels`).
LABELLED_ACCOUNTS = "labelled_accounts"
# msgspec analyses a generic type on every convert: 2.3 us for an empty list, 1.3 with the alias kept.
_PATTERNS = list[PatternActive]


class FeatureView:
    def __init__(self, store: Store, rules: ScoringRules) -> None:
        self.store = store
        self.rules = rules

    # Reads.
    def decision(self, account: str, call_id: str) -> CallDecided | None:
        raw = self.store.get(K.decision(account, call_id))
        return None if raw is None else msgspec.convert(raw, CallDecided)

    def refusal(self, event_id: str) -> CallRefused | None:
        raw = self.store.get(K.refusal(event_id))
        return None if raw is None else msgspec.convert(raw, CallRefused)

    def numbers(self, account: str) -> dict[str, int]:
        found: dict[str, int] = self.store.get(K.numbers(account)) or {}
        return found

    def scored_on(self, account: str, day_ms: int) -> int:
        return int(self.store.get(K.scored(account, day_ms)) or 0)

    def caller_calls(self, account: str, number: str, caller: str, since_ms: int, until_ms: int) -> int:
        times = self.store.get(K.caller_window(account, number, caller)) or []
        return sum(1 for t in times if since_ms < t <= until_ms)

    def outbound_calls(self, account: str, since_ms: int, until_ms: int) -> tuple[tuple[int, str], ...]:
        calls = self.store.get(K.outbound_calls(account)) or []
        return tuple((t, n) for t, n in calls if since_ms < t <= until_ms)

    def one_ring_ends(self, account: str, caller: str) -> tuple[int, ...]:
        return tuple(self.store.get(K.one_rings(account, caller)) or ())

    def caller(self, caller: str) -> tuple[History, int | None, int]:
        """The caller's network history, when it was first seen and how many accounts it reached (its
        non-quiet starts' accounts), from one read."""
        h = self.store.get(K.history(caller))
        if not h:
            return History(), None, 0
        reached = h["accounts"] if "accounts" in h else len(self._listed_accounts(caller))
        return _history(h), h.get("first"), reached

    def label_accounts(self, caller: str) -> dict[str, int]:
        """How many accounts labelled a call of the caller spam, and how many good: each once."""
        counted = (self.store.get(K.history(caller)) or {}).get(LABELLED_ACCOUNTS) or {}
        return {name: int(counted.get(name, 0)) for name in labels.LABELS}

    def caller_for(self, account: str, caller: str) -> CallerView:
        """The caller as `account`'s start sees it: every account's history for `prior`, and for the rules
        the account's own (its imports too) with the network's only where two other accounts agree."""
        h = self._raw(K.history(caller))
        network = _history(h)
        own_row = self.store.get(K.own(account, caller))
        own = _history(own_row) if own_row else History()
        imported = self.store.get(K.imported(account, caller))
        mine = own.plus(_history(imported)) if imported else own
        history = network.plus(_history(imported)) if imported else network
        rules, needed = self.rules, self.rules.network_agree_accounts
        agree, token = h.get("agree") or {}, h.get("token_agree") or {}
        (own_bad, own_good, own_above), (token_bad, token_good, token_above) = self._agreements(own_row)
        # Other accounts that agree, and of them those whose agreement only path tokens' events make.
        bad = (agree.get("bad", 0) - own_bad, token.get("bad", 0) - token_bad)
        good = (agree.get("good", 0) - own_good, token.get("good", 0) - token_good)
        above = (agree.get("above", 0) - own_above, token.get("above", 0) - token_above)
        evidence = msgspec.structs.replace(
            mine,
            good=mine.good + (network.good - own.good if agreed(*good, rules) else 0),
            above=mine.above + (network.above - own.above if agreed(*above, rules) else 0),
        )
        others = [at for at, reached in h.get("firsts", []) if reached != account]
        seen = [at for at in (own_row["first"] if own_row else None, *others[needed - 1 : needed]) if at is not None]
        reached = h["accounts"] if "accounts" in h else len(self._listed_accounts(caller))
        return CallerView(
            history=history,
            evidence=evidence,
            network_bad=agreed(*bad, rules),
            bad_accounts=bad[0],
            good_accounts=good[0],
            bad_token_accounts=bad[1],
            good_token_accounts=good[1],
            reached=reached,
            first_seen=min(seen) if seen else None,
        )

    def _agreement(self, row: dict[str, Any] | None) -> tuple[bool, bool, bool]:
        """What one account's own history of a caller says: a bad last call, good calls, calls above."""
        if not row:
            return False, False, False
        own = _history(row)
        return prior_bad(own, self.rules), own.good > 0, own.above > 0

    def _agreements(self, row: dict[str, Any] | None) -> tuple[tuple[bool, bool, bool], tuple[bool, bool, bool]]:
        """The account's agreements (`_agreement`), and which of them only its path tokens' events make: its
        history says so, the part its API keys posted (`keyed`) does not. A row with no `keyed` part is all
        its keys' (no token posted, or it was folded before the credential, when every fact was a key's)."""
        said = self._agreement(row)
        if not row or KEYED not in row:
            return said, (False, False, False)
        by_key = self._agreement(row[KEYED])
        return said, (said[0] and not by_key[0], said[1] and not by_key[1], said[2] and not by_key[2])

    def _own(
        self,
        account: str,
        caller: str,
        change: Callable[[dict[str, Any]], None],
        h: dict[str, Any],
        credential: str,
    ) -> None:
        """Apply `change` to the account's own history of the caller (and to its API keys' part of it, when
        `credential` is a key's), and its agreement to the network's."""
        self._own_parts(account, caller, change, change if credential == KEY_CREDENTIAL else None, h)

    def _own_parts(
        self,
        account: str,
        caller: str,
        change: Callable[[dict[str, Any]], None],
        keyed_change: Callable[[dict[str, Any]], None] | None,
        h: dict[str, Any],
    ) -> None:
        """`_own`, with what the API keys' part of the history gets apart: `keyed_change`, None for nothing."""
        key = K.own(account, caller)
        row = self._raw(key)
        before, before_token = self._agreements(row)
        labelled_before = labels.labelled(row)
        if keyed_change is not change and KEYED not in row:
            # A change the keys' part does not share: every fact folded into the row so far was an API key's.
            row[KEYED] = {name: row[name] for name in KEYED_FIELDS if name in row}
        change(row)
        if keyed_change is not None and KEYED in row:
            keyed_change(row[KEYED])
        self.store.put(key, row)
        labelled_after = labels.labelled(row)
        if labelled_after != labelled_before:
            counted = dict(h.get(LABELLED_ACCOUNTS) or {})
            for i, name in enumerate(labels.LABELS):
                counted[name] = counted.get(name, 0) + int(labelled_after[i]) - int(labelled_before[i])
            h[LABELLED_ACCOUNTS] = counted
        agree = h.setdefault("agree", {"bad": 0, "good": 0, "above": 0})
        token = h.setdefault("token_agree", {"bad": 0, "good": 0, "above": 0})
        after, after_token = self._agreements(row)
        for i, name in enumerate(("bad", "good", "above")):
            agree[name] += int(after[i]) - int(before[i])
            token[name] += int(after_token[i]) - int(before_token[i])
        firsts = [f for f in h.get("firsts", []) if f[1] != account]
        # The earliest few accounts' first calls: the `needed`-th other account's is at hand whichever asks.
        keep = self.rules.network_agree_accounts + 1
        h["firsts"] = sorted([*firsts, [row["first"], account]])[:keep] if row["first"] is not None else firsts

    def provider_alias(self, account: str, provider_call_id: str) -> str | None:
        found: str | None = self.store.get(K.provider(account, provider_call_id))
        return found

    def hourly(self, account: str, number: str) -> dict[str, int]:
        found: dict[str, int] = self.store.get(K.hours(account, number)) or {}
        return found

    def block(self, account: str, number: str, caller: str, at: int) -> PublicBlock | None:
        found = self.store.get(K.block(account, number, caller))
        if found is None or not found["since"] <= at < found["until"]:
            return None
        return PublicBlock(
            reason=found["reason"],
            alert_id=found["alert_id"],
            since=format_ms(found["since"]),
            until=format_ms(found["until"]),
        )

    def patterns(self, account: str, number: str, at: int) -> list[PatternActive]:
        return [p for p in self._active(K.patterns(account, number)) if p.since <= at < p.until]

    def delivery(self, alert_id: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self.store.get(K.delivery(alert_id))
        return found

    def alias_for(self, account: str, call_id: str, provider_call_id: str | None) -> str | None:
        """The call an event belongs to when another record holds it: under its provider id, or, when the
        carrier reported first under its own id with no provider id, under the id this event names as
        its provider's."""
        for candidate in (call_id, provider_call_id):
            if candidate:
                target = self.provider_alias(account, candidate)
                if target and target != call_id:
                    return target
        if provider_call_id and provider_call_id != call_id and self.store.get(K.decision(account, provider_call_id)):
            return provider_call_id
        return None

    # The fold.
    def apply(self, fact: Fact) -> bool:
        """Fold one fact; False when it was already applied (or is not one the view keeps)."""
        if isinstance(fact, CallDecided):
            return self._decided(fact)
        if isinstance(fact, CallSettled):
            return self._settled(fact)
        if isinstance(fact, CallLabelled):
            return self._labelled(fact)
        if isinstance(fact, CallRefused):
            return self._once(K.refusal(fact.id), fact)
        if isinstance(fact, BlockPlaced):
            return self._block(fact)
        if isinstance(fact, PatternActive):
            return self._pattern(fact)
        if isinstance(fact, PointsCharged):
            return self._points(fact)
        if isinstance(fact, NumberRemoved):
            return self._removed(fact)
        return False

    def channels(self, alert_id: str) -> dict[str, bool]:
        """Per email, text and voice channel the alert went to: whether any destination got it."""
        found: dict[str, bool] = self.store.get(K.channels(alert_id)) or {}
        return found

    def apply_delivery(self, record: AnyDelivery) -> bool:
        """The latest word on an alert's webhook (skipped, attempted, then its outcome), or on its channels."""
        if isinstance(record, HangUpAttempt | HangUpOutcome):
            return False
        if isinstance(record, ChannelSkipped | ChannelAttempt | ChannelOutcome):
            return self._channel(record)
        key = K.delivery(record.alert_id)
        known = self.store.get(key)
        if known is not None and known["kind"] == "delivery.outcome":
            return False
        summary: dict[str, Any] = {"kind": record.__struct_config__.tag, "delivered": False}
        if isinstance(record, DeliveryOutcome):
            summary.update(
                delivered=record.delivered, status=record.status, error=record.error, duration_ms=record.duration_ms
            )
        self.store.put(key, summary)
        return True

    def _channel(self, record: ChannelSkipped | ChannelAttempt | ChannelOutcome) -> bool:
        key = K.channels(record.alert_id)
        known = self.channels(record.alert_id)
        delivered = known.get(record.channel, False) or (isinstance(record, ChannelOutcome) and record.delivered)
        if known.get(record.channel) is delivered:
            return False
        self.store.put(key, {**known, record.channel: delivered})
        return True

    def removals(self, account: str) -> dict[str, int]:
        found: dict[str, int] = self.store.get(K.removed(account)) or {}
        return found

    def _removed(self, fact: NumberRemoved) -> bool:
        """The number leaves the account's numbers, unless a start received after the removal (its created
        time later than it) has registered it again; a decision received before it never re-adds it."""
        removals = self.removals(fact.account_id)
        if removals.get(fact.number, -1) >= fact.at:
            return False
        self.store.put(K.removed(fact.account_id), {**removals, fact.number: fact.at})
        numbers = self.numbers(fact.account_id)
        if fact.number in numbers and numbers[fact.number] <= fact.at:
            del numbers[fact.number]
            self.store.put(K.numbers(fact.account_id), numbers)
        return True

    def _once(self, key: str, value: Any) -> bool:
        if self.store.get(key) is not None:
            return False
        self.store.put(key, value)
        return True

    def _block(self, fact: BlockPlaced) -> bool:
        key = K.block(fact.account_id, fact.number, fact.caller)
        existing = self.store.get(key)
        if existing is not None and existing["until"] >= fact.until:
            return False
        self.store.put(
            key, {"reason": fact.reason, "alert_id": fact.alert_id, "since": fact.since, "until": fact.until}
        )
        return True

    def _pattern(self, fact: PatternActive) -> bool:
        key = K.patterns(fact.account_id, fact.number)
        active = [p for p in self._active(key) if p.until > fact.since]
        if any(p.id == fact.id for p in active):
            return False
        # One entry per (pattern, match, width), the latest-lasting, and only the newest few: a flood of
        # clusters on one number must not grow one value without bound.
        merged = {(p.pattern, p.match, p.width): p for p in sorted([*active, fact], key=lambda p: (p.until, p.id))}
        ordered = sorted(merged.values(), key=lambda p: (p.until, p.pattern, p.match))[-PATTERNS_KEEP:]
        self.store.put(key, msgspec.to_builtins(ordered))
        return True

    def _points(self, fact: PointsCharged) -> bool:
        if not self._once(K.charged(fact.id), 1):
            return False
        h = self._raw_history(fact.caller)
        h["points"] = h.get("points", 0) + fact.points
        self.store.put(K.history(fact.caller), h)
        return True

    def _decided(self, fact: CallDecided) -> bool:
        account, call_id = fact.account_id, fact.call_id
        # The fact itself, not its builtins: the store encodes it to the same JSON, and only when it is new.
        if not self._once(K.decision(account, call_id), fact):
            return False
        number, caller, at = fact.number, fact.caller, fact.at
        numbers = self.numbers(account)
        if (number in numbers and at < numbers[number]) or (
            number not in numbers and fact.received_at > self.removals(account).get(number, -1)
        ):
            numbers[number] = at
            self.store.put(K.numbers(account), numbers)
        if fact.provider_call_id:
            self.store.put(K.provider(account, fact.provider_call_id), call_id)
        if not fact.answer.capped and not fact.quiet:
            day = K.scored(account, day_start_ms(fact.received_at))
            self.store.put(day, int(self.store.get(day) or 0) + 1)
        window = K.caller_window(account, number, caller)
        self.store.put(window, sorted([*(self.store.get(window) or []), at])[-WINDOW_KEEP:])
        if fact.direction == "outbound":
            self._outbound(account, caller, at)
        hours = self.hourly(account, number)
        bucket = str(at - at % HOUR_MS)
        hours[bucket] = hours.get(bucket, 0) + 1
        newest = max(int(h) for h in hours)
        kept = {h: n for h, n in hours.items() if int(h) > newest - BUCKET_DAYS * DAY_MS}
        self.store.put(K.hours(account, number), kept)
        if fact.quiet:
            # Imported history is the account's own: it never speaks for the caller network-wide.
            imported = self._raw(K.imported(account, caller))
            imported["calls"] += 1
            _latest_start(imported, fact)
            self.store.put(K.imported(account, caller), imported)
            return True
        h = self._raw_history(caller)
        _decided_into(h, fact)
        self._own(account, caller, lambda own: _decided_into(own, fact), h, fact.credential)
        self._count_account(h, caller, account)
        self.store.put(K.history(caller), h)
        return True

    def _outbound(self, account: str, dialled: str, at: int) -> None:
        """The start in the account's burst window; what the newest start's window no longer holds goes."""
        key = K.outbound_calls(account)
        calls = sorted([*(self.store.get(key) or []), [at, dialled]])
        newest = calls[-1][0]
        kept = [c for c in calls if c[0] > newest - self.rules.burst_window_ms][-OUTBOUND_KEEP:]
        self.store.put(key, kept)

    def _one_ring(self, fact: CallSettled) -> None:
        """An inbound call that ended unanswered within seconds: its caller is a one-ring number to the account."""
        answered = fact.reason not in NOT_ANSWERED
        if fact.started_at is None or not one_ring(fact.direction, answered, fact.started_at, fact.at, self.rules):
            return
        key = K.one_rings(fact.account_id, fact.caller)
        self.store.put(key, sorted([*(self.store.get(key) or []), fact.at])[-ONE_RINGS_KEEP:])

    def _count_account(self, h: dict[str, Any], caller: str, account: str) -> None:
        """One key per account the caller reached, and their count in its history: a list of them, read by
        each start and rewritten whole for each new account, grew with a caller that calls thousands."""
        if "accounts" not in h:
            # A history folded before the count: its list becomes keys, once, and goes.
            listed = self._listed_accounts(caller)
            for reached in listed:
                self.store.put(K.network(caller, reached), 1)
            self.store.delete(K.accounts(caller))
            h["accounts"] = len(listed)
        member = K.network(caller, account)
        if self.store.get(member) is None:
            self.store.put(member, 1)
            h["accounts"] += 1

    def _listed_accounts(self, caller: str) -> list[str]:
        """The accounts a history folded before the count kept as a list beside it (none once counted)."""
        listed: list[str] = self.store.get(K.accounts(caller)) or []
        return listed

    def _settled(self, fact: CallSettled) -> bool:
        if not self._once(K.settled(fact.account_id, fact.call_id), 1):
            return False
        self._one_ring(fact)
        spam = fact.spam_score
        if fact.label_seq:
            self._settled_labelled(fact)
            return True
        if spam is None:
            return True
        if fact.quiet:
            key = K.imported(fact.account_id, fact.caller)
            imported = self._raw(key)
            self._settled_into(imported, fact, spam)
            self.store.put(key, imported)
            return True
        h = self._raw_history(fact.caller)
        self._settled_into(h, fact, spam)
        self._own(fact.account_id, fact.caller, lambda own: self._settled_into(own, fact, spam), h, fact.credential)
        self.store.put(K.history(fact.caller), h)
        return True

    def _settled_into(self, h: dict[str, Any], fact: CallSettled, spam: int) -> None:
        rules = self.rules
        h["above"] = h.get("above", h["bad"]) + (spam > rules.prior_good_none_above)
        h["good"] += spam < rules.prior_good_below
        h["bad"] += spam >= rules.prior_bad_spam
        _latest_settled(h, {"score": int(spam), "at": fact.at})

    def _settled_labelled(self, fact: CallSettled) -> None:
        """A labelled call settled: it counts by its label (`domain.labels`), and its score is the latest."""
        key = K.label(fact.account_id, fact.call_id)
        stored = self.store.get(key)
        before = msgspec.convert(stored, Mark) if stored is not None else Mark()
        spam_key = fact.credential == KEY_CREDENTIAL
        if before.seq > fact.label_seq:
            # A later label came first: it stands, with this score under it.
            after = msgspec.structs.replace(before, spam=fact.spam_score, spam_key=spam_key)
        else:
            after = Mark(
                label=fact.label,
                label_key=fact.label_credential == KEY_CREDENTIAL,
                spam=fact.spam_score,
                spam_key=spam_key,
                seq=fact.label_seq,
            )
        settled = None if fact.spam_score is None else {"score": int(fact.spam_score), "at": fact.at}
        self._remark(fact.account_id, fact.caller, fact.quiet, before, after, settled)
        self.store.put(key, after)

    def _labelled(self, fact: CallLabelled) -> bool:
        """A call's label changed: what it counted for in its caller's history moves (`domain.labels`)."""
        key = K.label(fact.account_id, fact.call_id)
        stored = self.store.get(key)
        if stored is not None and stored.get("seq", 0) >= fact.seq:
            return False
        spam_key = fact.credential == KEY_CREDENTIAL
        # Unmarked, the call counts as it settled (if it did), unlabelled.
        before = msgspec.convert(stored, Mark) if stored is not None else Mark(spam=fact.spam_score, spam_key=spam_key)
        after = Mark(
            label=fact.label,
            label_key=fact.label_credential == KEY_CREDENTIAL,
            spam=fact.spam_score,
            spam_key=spam_key,
            seq=fact.seq,
        )
        self._remark(fact.account_id, fact.caller, fact.quiet, before, after, None)
        self.store.put(key, after)
        return True

    def _remark(
        self, account: str, caller: str, quiet: bool, before: Mark, after: Mark, settled: dict[str, int] | None
    ) -> None:
        """A call's mark went from `before` to `after`: its caller's histories change by the difference, and
        `settled` (the call's settled score) is their latest when it is."""
        rules = self.rules
        delta = labels.change(before, after, rules)

        def change(row: dict[str, Any]) -> None:
            labels.add(row, delta)
            if settled is not None:
                _latest_settled(row, settled)

        if quiet:
            # Imported history is the account's own: it never speaks for the caller network-wide.
            key = K.imported(account, caller)
            imported = self._raw(key)
            change(imported)
            self.store.put(key, imported)
            return
        keyed_delta = labels.change(before, after, rules, keyed=True)
        keyed_settled = settled if after.spam_key else None

        def keyed_change(row: dict[str, Any]) -> None:
            labels.add(row, keyed_delta)
            if keyed_settled is not None:
                _latest_settled(row, keyed_settled)

        same = keyed_delta == delta and keyed_settled == settled
        h = self._raw_history(caller)
        # The network's history counts the calls; the labels it counts are the accounts' (`_own_parts`).
        labels.add(h, {**delta, "labelled_spam": 0, "labelled_good": 0})
        if settled is not None:
            _latest_settled(h, settled)
        self._own_parts(account, caller, change, change if same else keyed_change, h)
        self.store.put(K.history(caller), h)

    def _active(self, key: str) -> list[PatternActive]:
        """The patterns stored under `key` (most numbers have none: no convert then)."""
        stored = self.store.get(key)
        return msgspec.convert(stored, _PATTERNS) if stored else []

    def _raw_history(self, caller: str) -> dict[str, Any]:
        return self._raw(K.history(caller))

    def _raw(self, key: str) -> dict[str, Any]:
        found: dict[str, Any] | None = self.store.get(key)
        return found or {
            "calls": 0,
            "good": 0,
            "bad": 0,
            "above": 0,
            "points": 0,
            "settled": None,
            "start": None,
            "first": None,
            "accounts": 0,
        }


def _latest_settled(h: dict[str, Any], settled: dict[str, int]) -> None:
    if h.get("settled") is None or settled["at"] >= h["settled"]["at"]:
        h["settled"] = settled


def _history(h: dict[str, Any]) -> History:
    return History(
        calls=h["calls"],
        good=h["good"],
        bad=h["bad"],
        # A history folded before `above` was counted: its calls at 70 or more stand in for it.
        above=h.get("above", h["bad"]),
        points=h.get("points", 0),
        last_settled=Last(**h["settled"]) if h.get("settled") else None,
        last_start=Last(**h["start"]) if h.get("start") else None,
        labelled_spam=(h.get(labels.LABEL_COUNTS) or {}).get(labels.SPAM, 0),
    )


def _decided_into(h: dict[str, Any], fact: CallDecided) -> None:
    h["calls"] += 1
    h["first"] = fact.at if h.get("first") is None else min(h["first"], fact.at)
    _latest_start(h, fact)


def _latest_start(h: dict[str, Any], fact: CallDecided) -> None:
    """The start's score as the history's latest, unless a later start holds it (a capped one has none)."""
    if fact.answer.capped or not SETTINGS_REASONS.isdisjoint(fact.answer.reasons):
        # A start scored by what its account allows says nothing of the number it dialled.
        return
    start = {"score": round(fact.answer.score * 100), "at": fact.at}
    if h.get("start") is None or start["at"] >= h["start"]["at"]:
        h["start"] = start


def context(view: FeatureView, state: Stored | None, event: AnyEvent, rules: Rules) -> StartContext:
    """What `event` reads beyond its call: for a new call its alias, for a start its score's features."""
    account = event.account_id
    if state is None and not isinstance(event, CallStarted):
        return StartContext(alias=view.alias_for(account, event.call_id, getattr(event, "provider_call_id", None)))
    if not isinstance(event, CallStarted) or isinstance(state, CallState):
        return StartContext()
    number, caller, at = event.number, event.caller, event.at
    numbers = view.numbers(account)
    caller_view = view.caller_for(account, caller)
    geo = event.attrs.get("geo")
    zip_code = geo.get("zip") if isinstance(geo, dict) else None
    patterns = frozenset(
        p.pattern
        for p in view.patterns(account, number, at)
        if pattern_matches(p, caller, event.caller_info.country, zip_code)
    )
    found = StartContext(
        alias=view.alias_for(account, event.call_id, event.provider_call_id) if state is None else None,
        decided=view.decision(account, event.call_id),
        refused=view.refusal(event.id),
        numbers=len(numbers),
        number_known=number in numbers,
        scored_today=view.scored_on(account, day_start_ms(event.received_at or at)),
        caller_calls=view.caller_calls(account, number, caller, at - rules.scoring.rate_window_ms, at),
        caller=caller_view,
        patterns=patterns,
        block=view.block(account, number, caller, at),
    )
    if event.direction != "outbound":
        return found
    return msgspec.structs.replace(
        found,
        number_countries=frozenset({*(country_of(n) for n in numbers), event.number_info.country}),
        outbound_calls=view.outbound_calls(account, at - rules.scoring.burst_window_ms, at),
        one_ring_ends=view.one_ring_ends(account, caller),
    )


# Room for every protected number of a large deployment: at 4,096 the bench's 20,000 numbers evicted each
# other and every outbound start parsed its account's 25 numbers again (75 µs each).
COUNTRY_CACHE_NUMBERS = 1 << 17


@functools.lru_cache(maxsize=COUNTRY_CACHE_NUMBERS)
def country_of(number: str) -> str:
    """A protected number's country, parsed once: every outbound start of its account asks for it."""
    parsed = parse_number(number)
    return parsed.country if parsed is not None else ""
