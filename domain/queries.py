"""Read-only questions the edge asks the workers (schemas/openapi.json), answered from state.

Each question goes to the partition of the state it reads; `now` comes from the edge, so nothing
here reads a clock. The answer is a status and a JSON-shaped body.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from domain import evaluation, keys
from domain.alerts import Alert
from domain.calls import Alias, CallState, public_call, signals
from domain.events import CallerInfo, CallStarted, NumberInfo
from domain.features import FeatureView, context
from domain.index import AlertEntry, CallEntry, CallFilter, Hours, Position, Scan, decode_cursor, seek, sort_key
from domain.outbound import Outbound
from domain.policy import Policy, scoring_for
from domain.rules import DAY_MS, HOUR_MS, Rules
from domain.scoring import score_start
from domain.times import format_ms

Lookup = Callable[[str], Any]


class Question(msgspec.Struct, frozen=True, kw_only=True, tag_field="q", gc=False):
    account_id: str


class AccountUsage(Question, frozen=True, kw_only=True, tag="account.usage"):
    day: int


class CallGet(Question, frozen=True, kw_only=True, tag="call.get"):
    call_id: str


class CallsList(Question, frozen=True, kw_only=True, tag="calls.list"):
    limit: int
    number: str | None = None
    since: int | None = None
    until: int | None = None
    action: str | None = None
    source: str | None = None
    cursor: str | None = None


class NumbersList(Question, frozen=True, kw_only=True, tag="numbers"):
    plan: str
    now: int


class ScoreQuestion(Question, frozen=True, kw_only=True, tag="score"):
    number: str
    caller: str
    at: int
    trusted: bool
    number_info: NumberInfo
    caller_info: CallerInfo
    policy: Policy | None = None
    # An outbound question is scored as an outbound start is: where it goes, by the account's settings.
    direction: str = "inbound"
    outbound: Outbound | None = None


class ReputationQuestion(Question, frozen=True, kw_only=True, tag="reputation"):
    number: str
    now: int


class AlertGet(Question, frozen=True, kw_only=True, tag="alert.get"):
    alert_id: str


class AlertsList(Question, frozen=True, kw_only=True, tag="alerts.list"):
    limit: int
    since: int | None = None
    type: str | None = None
    cursor: str | None = None


class EvaluationPart(Question, frozen=True, kw_only=True, tag="evaluation"):
    """One bounded read of a partition's labelled calls started in [since, until), below `before` (the
    previous read's stop), for `GET /v1/evaluation`."""

    since: int | None = None
    until: int | None = None
    before: Position | None = None


AnyQuestion = (
    AccountUsage
    | CallGet
    | CallsList
    | NumbersList
    | ScoreQuestion
    | ReputationQuestion
    | AlertGet
    | AlertsList
    | EvaluationPart
)

_questions = msgspec.json.Decoder(AnyQuestion)


def decode_question(raw: bytes) -> AnyQuestion:
    question: AnyQuestion = _questions.decode(raw)
    return question


class Reads:
    """Where answers come from: the partition's tables (by key) and the worker's feature view, and how many
    index rows a listing may read (`Settings.query_scan_max_rows`; None: no bound)."""

    def __init__(
        self,
        view: FeatureView,
        call_of: Lookup,
        call_index_scan: Scan,
        alert_of: Lookup,
        alert_index_scan: Scan,
        scan_max_rows: int | None = None,
    ) -> None:
        self.view = view
        self.call_of = call_of
        self.call_index_scan = call_index_scan
        self.alert_of = alert_of
        self.alert_index_scan = alert_index_scan
        self.scan_max_rows = scan_max_rows


def answer(question: AnyQuestion, partition: int, reads: Reads, rules: Rules) -> tuple[int, Any]:
    view, account = reads.view, question.account_id
    if isinstance(question, AccountUsage):
        return 200, {"numbers": len(view.numbers(account)), "scored_today": view.scored_on(account, question.day)}
    if isinstance(question, CallGet):
        return get_call(question, reads)
    if isinstance(question, CallsList):
        return 200, list_calls(question, partition, reads)
    if isinstance(question, NumbersList):
        return 200, numbers(view, account, question.now, rules.plans.plan(question.plan).numbers)
    if isinstance(question, ScoreQuestion):
        return 200, score_only(question, view, rules)
    if isinstance(question, ReputationQuestion):
        return 200, reputation(view, question.number, question.now)
    if isinstance(question, EvaluationPart):
        return 200, evaluation_part(question, partition, reads)
    if isinstance(question, AlertGet):
        alert = reads.alert_of(keys.alert(account, question.alert_id))
        return (200, public_alert(alert, view)) if alert is not None else (404, {"error": "not_found"})
    return 200, list_alerts(question, partition, reads)


def get_call(question: CallGet, reads: Reads) -> tuple[int, Any]:
    stored = reads.call_of(keys.call(question.account_id, question.call_id))
    if isinstance(stored, Alias):
        return 200, {"alias_of": stored.alias_of}
    if stored is None:
        target = reads.view.provider_alias(question.account_id, question.call_id)
        return (200, {"alias_of": target}) if target else (404, {"error": "not_found"})
    return 200, public_call(stored)


def list_calls(question: CallsList, partition: int, reads: Reads) -> dict[str, Any]:
    """The partition's newest `limit + 1` matches, and `stop` when the bound on rows read cut the read
    short of them (`domain.index.Hours`): the edge then pages from there (`domain.index.page_of`)."""
    wanted = CallFilter(
        number=question.number,
        since=question.since,
        until=question.until,
        action=question.action,
        source=question.source,
        after=decode_cursor(question.cursor) if question.cursor else None,
    )
    before = _older_of(wanted.after, None if wanted.until is None else (wanted.until, ""))
    # No index by number: a `number` filter reads the account's rows like any other filter, within the bound.
    hours = Hours(
        reads.call_index_scan,
        *seek("calls", question.account_id, partition, before, wanted.since),
        reads.scan_max_rows,
    )
    found: list[CallEntry] = []
    for _, raw in hours:
        entries = msgspec.convert(raw, list[CallEntry])
        found.extend(e for e in entries if wanted.matches(e))
        if len(found) > question.limit:
            break
    found.sort(key=sort_key, reverse=True)
    page = found[: question.limit + 1]
    records = {}
    for entry in page[: question.limit]:
        records[entry.call_id] = public_call(reads.call_of(keys.call(question.account_id, entry.call_id)))
    return {"entries": msgspec.to_builtins(page), "calls": records, "stop": hours.stop}


def evaluation_part(question: EvaluationPart, partition: int, reads: Reads) -> dict[str, Any]:
    """The partition's tally (`domain.evaluation`) of labelled calls in the window, as far as the bound on
    rows read reaches, and `stop` to read on from (None: the window is all read)."""
    window = CallFilter(since=question.since, until=question.until)
    before = question.before
    if before is None and question.until is not None:
        before = (question.until, "")
    hours = Hours(
        reads.call_index_scan,
        *seek("calls", question.account_id, partition, before, question.since),
        reads.scan_max_rows,
    )
    tally = evaluation.empty()
    for _, raw in hours:
        for entry in msgspec.convert(raw, list[CallEntry]):
            if not window.matches(entry):
                continue
            call = reads.call_of(keys.call(question.account_id, entry.call_id))
            if isinstance(call, CallState) and call.label is not None:
                evaluation.count(tally, call.answer.action, call.answer.reasons, call.label)
    return {"tally": tally, "stop": hours.stop}


def _older_of(first: Position | None, second: Position | None) -> Position | None:
    if first is None or second is None:
        return first if second is None else second
    return min(first, second)


def public_alert(alert: Alert, view: FeatureView) -> dict[str, Any]:
    """The envelope of docs/api.md, with the delivery outcome joined in."""
    delivery = view.delivery(alert.id)
    detail = None
    if delivery is not None and delivery["kind"] == "delivery.outcome":
        detail = {k: delivery[k] for k in ("status", "error", "duration_ms")}
    return {
        **alert.envelope(),
        "severity": alert.severity,
        "delivered": {"webhook": bool(delivery and delivery["delivered"]), **view.channels(alert.id)},
        "delivery": detail,
    }


def list_alerts(question: AlertsList, partition: int, reads: Reads) -> dict[str, Any]:
    """As `list_calls`, for the account's alerts."""
    after = decode_cursor(question.cursor) if question.cursor else None
    since, kind, limit = question.since, question.type, question.limit
    hours = Hours(
        reads.alert_index_scan, *seek("alerts", question.account_id, partition, after, since), reads.scan_max_rows
    )
    found: list[AlertEntry] = []
    for _, raw in hours:
        for entry in msgspec.convert(raw, list[AlertEntry]):
            if since is not None and entry.at < since:
                continue
            if kind is not None and entry.type != kind:
                continue
            if after is not None and (entry.at, entry.alert_id) >= after:
                continue
            found.append(entry)
        if len(found) > limit:
            break
    found.sort(key=sort_key, reverse=True)
    page = found[: limit + 1]
    alerts = {}
    for entry in page[:limit]:
        alerts[entry.alert_id] = public_alert(
            reads.alert_of(keys.alert(question.account_id, entry.alert_id)), reads.view
        )
    return {"entries": msgspec.to_builtins(page), "alerts": alerts, "stop": hours.stop}


def numbers(view: FeatureView, account: str, now: int, cap: int) -> dict[str, Any]:
    data = []
    for number, created in sorted(view.numbers(account).items(), key=lambda kv: (kv[1], kv[0])):
        hours = view.hourly(account, number)
        recent = sum(n for hour, n in hours.items() if now - 25 * HOUR_MS < int(hour) <= now)
        data.append({"number": number, "created_at": format_ms(created), "calls_24h": recent})
    return {"data": data, "cap": cap}


def score_only(question: ScoreQuestion, view: FeatureView, rules: Rules) -> dict[str, Any]:
    """The score a start would get now, computed and not recorded."""
    probe = CallStarted(
        id="",
        account_id=question.account_id,
        call_id="",
        at=question.at,
        to=question.number,
        from_=question.caller,
        number=question.number,
        caller=question.caller,
        number_info=question.number_info,
        caller_info=question.caller_info,
        trusted=question.trusted,
        direction=question.direction,
        outbound=question.outbound,
    )
    found = context(view, None, probe, rules)
    scoring = scoring_for(rules.scoring, question.policy)
    result = score_start("", signals(probe, found, scoring), scoring)
    body: dict[str, Any] = msgspec.to_builtins(result)
    del body["call_id"]
    return body


def reputation(view: FeatureView, number: str, now: int) -> dict[str, Any]:
    """Network-wide aggregates for a number: never an account id or a call."""
    history, _, reached = view.caller(number)
    last = history.last
    return {
        "number": number,
        "score": 0.0 if last is None else round(last.score / 100, 4),
        "calls": history.calls,
        "good": history.good,
        "accounts": reached,
        "last": None if last is None else {"score": last.score, "days": max(0, (now - last.at) // DAY_MS)},
        "flags": ["prior_bad"] if history.bad else [],
        # Accounts that labelled a call of the number spam, and good: each at most once per label.
        "labels": view.label_accounts(number),
    }
