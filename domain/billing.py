"""Failed Guard-plan payments (schemas/billing.schema.json) and the alert they raise."""

from __future__ import annotations

import msgspec

from domain.alerts import Alert, make_alert
from domain.rules import MIN_MS, DetectorRules


class PaymentFailed(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="payment.failed", gc=False):
    id: str
    account_id: str
    amount_cents: int
    attempt: int
    at: int


class LastAlerted(msgspec.Struct, frozen=True, gc=False):
    id: str
    at: int


def payment_failed(
    last: LastAlerted | None, record: PaymentFailed, rules: DetectorRules
) -> tuple[LastAlerted | None, Alert | None]:
    """One `billing.payment_failed` per account per cooldown. The record that raised it, folded again (after
    a crash), raises the same alert again, which every consumer counts once."""
    if last is not None and last.id != record.id and record.at - last.at < rules.cooldown_min * MIN_MS:
        return last, None
    data = {"amount_cents": record.amount_cents, "attempt": record.attempt}
    alert = make_alert(record.account_id, "billing.payment_failed", record.account_id, record.at, record.at, data)
    return (last if last is not None and last.id == record.id else LastAlerted(record.id, record.at)), alert
