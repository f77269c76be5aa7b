"""The folds of the alerts, accounts and billing topics: alerts become listable; failed payments and owners' test
requests (on the accounts topic) become alerts; a removed number (on the accounts topic too) becomes the
feature view's fact."""

from __future__ import annotations

import msgspec

from domain import billing, keys
from domain.accounts import NUMBER_REMOVED
from domain.alerts import (
    SCREENING_LOST,
    TEST_REQUESTED,
    Alert,
    AlertTestRequest,
    ScreeningLost,
    requested_test,
    screening_unavailable,
)
from domain.billing import LastAlerted, PaymentFailed
from domain.facts import NumberRemoved
from domain.index import AlertEntry
from domain.outbound import OUTBOUND_KINDS, KillSwitch, folded, trip
from domain.rules import MIN_MS
from domain.times import parse_ms
from processors.folds.parts import Parts
from processors.folds.shell import Pending, Record, each_record


def register(w: Parts) -> None:
    w.tables.table("alert_store")
    w.tables.table("billing")
    w.tables.table("outbound")

    async def store_one(record: Record, pending: Pending, replay: bool) -> None:
        # Stored on a replay too: the store is this fold's own table.
        alert = store_alert(w, record)
        if not replay:
            await kill_switch(w, alert, pending)

    each_record(w, "alerts", store_one)
    each_record(w, "accounts", lambda record, pending, replay: fold_account_change(w, record, pending, replay))
    each_record(w, "billing", lambda record, pending, replay: fold_payment(w, record, pending, replay))


def store_alert(w: Parts, record: Record) -> Alert:
    alert = msgspec.json.decode(record.value, type=Alert)
    key = keys.alert(alert.account_id, alert.id)
    if w.tables.get("alert_store", key, Alert) is None:
        w.tables.put("alert_store", key, alert)
    # Even for a stored alert: after a kill the index may have been recovered without its entry.
    entry = AlertEntry(parse_ms(alert.created_at) or 0, alert.id, alert.type)
    w.tables.add_to_index("alert_store", "alerts", alert.account_id, record.message.partition, entry)
    eviction = w.tables.evict("alert_store", "alerts", record.message.partition, entry.at, w.rules.limits.hot_days)
    if eviction is not None:
        for alert_id in eviction.items:
            w.tables.delete("alert_store", keys.alert(eviction.account, alert_id))
    return alert


async def kill_switch(w: Parts, alert: Alert, pending: Pending) -> None:
    """A cause on an outbound number pauses the account's outbound (docs/rules.md, Outbound guard): the pause
    is a record on the accounts topic, which the edge stamps on the next outbound starts, and one
    `outbound.paused` alert. The alerts and accounts topics are both keyed by account, so the fold that
    sees an account's alerts folds its outbound records too."""
    tripped = trip(
        w.tables.get("outbound", alert.account_id, KillSwitch), alert, w.rules.detectors.cooldown_min * MIN_MS
    )
    if tripped is None:
        return
    # Kept before the record comes back, so a second cause in between pauses nothing more.
    w.tables.put("outbound", alert.account_id, tripped.state)
    pending.append(await w.appender.append("accounts", alert.account_id, tripped.record))
    if tripped.alert is not None:
        pending.append(await w.appender.append("alerts", alert.account_id, tripped.alert))


async def fold_account_change(w: Parts, record: Record, pending: Pending, replay: bool) -> None:
    change = msgspec.json.decode(record.value)
    if not isinstance(change, dict):
        return
    if change.get("kind") in OUTBOUND_KINDS:
        # On a replay too: the kill switch is this fold's own table.
        account = str(change["account_id"])
        w.tables.put("outbound", account, folded(w.tables.get("outbound", account, KillSwitch), change))
        return
    if replay:
        return
    if change.get("kind") == TEST_REQUESTED:
        alert = requested_test(msgspec.convert(change, AlertTestRequest))
        pending.append(await w.appender.append("alerts", alert.account_id, alert))
    elif change.get("kind") == SCREENING_LOST:
        cooldown_ms = w.rules.detectors.cooldown_min * MIN_MS
        alert = screening_unavailable(msgspec.convert(change, ScreeningLost), cooldown_ms)
        pending.append(await w.appender.append("alerts", alert.account_id, alert))
    elif change.get("kind") == NUMBER_REMOVED:
        account, number = str(change["account_id"]), str(change["number"])
        removed = NumberRemoved(id=str(change["id"]), account_id=account, number=number, at=parse_ms(change["at"]) or 0)
        pending.append(await w.appender.append("decisions", keys.number(account, number), removed))
    # Every other account change is the edge's and the alerting role's to fold.


async def fold_payment(w: Parts, record: Record, pending: Pending, replay: bool) -> None:
    try:
        payment = msgspec.json.decode(record.value, type=PaymentFailed)
    except msgspec.ValidationError:
        return  # another kind of billing record
    last = w.tables.get("billing", payment.account_id, LastAlerted)
    after, alert = billing.payment_failed(last, payment, w.rules.detectors)
    if after is not last:
        w.tables.put("billing", payment.account_id, after)
    if alert is not None and not replay:
        pending.append(await w.appender.append("alerts", alert.account_id, alert))
