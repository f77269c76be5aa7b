"""A fold replayed after a crash (the same event again) gives the same answer and appends the same facts
again, so every consumer's dedupe by id makes them count once; on plain data, with the view in memory."""

from __future__ import annotations

from typing import Any

from callscreen.testing import Account as HarnessAccount
from callscreen.testing import Harness
from domain import billing, calls, detectors, features
from domain.billing import PaymentFailed
from domain.calls import Outcome, Stored
from domain.events import AnyEvent
from domain.facts import NumberTick
from domain.features import FeatureView
from domain.rules import Rules
from domain.store import MemoryStore
from domain.times import format_ms
from domain.validation import Stamp, TimeBounds, parse_event

RULES = Rules()
AT = 1_800_000_000_000


def event(event_id: str, body: dict[str, Any]) -> AnyEvent:
    """The event the edge appends for `body`."""
    return parse_event(body, Stamp(event_id, "acct_x", "guard", AT), TimeBounds.of(RULES.limits))


def started(**fields: Any) -> dict[str, Any]:
    body = {"type": "call.started", "call_id": "c1", "to": "+14155552671", "from": "+16465550123"}
    return {**body, "at": format_ms(AT - 60_000), **fields}


def ended() -> dict[str, Any]:
    return {"type": "call.ended", "call_id": "c1", "at": format_ms(AT), "reason": "completed"}


def fold(state: Stored | None, folded: AnyEvent, view: FeatureView) -> Outcome:
    """One fold whose facts the view applies, as the worker's mirror does when it appends them."""
    outcome = calls.fold(state, folded, features.context(view, state, folded, RULES), RULES)
    for fact in outcome.facts:
        view.apply(fact)
    return outcome


def test_a_refused_start_folded_again_appends_its_refusal_again() -> None:
    view = FeatureView(MemoryStore(), RULES.scoring)
    start = event("ev-1", started(register=False))
    first = fold(None, start, view)
    assert (first.status, first.body) == (409, {"error": "not_protected"})
    assert [type(fact).__name__ for fact in first.facts] == ["CallRefused"]
    again = fold(None, start, view)
    assert (again.status, again.body, again.facts) == (first.status, first.body, first.facts)


def test_a_decided_start_folded_again_rebuilds_its_record_from_the_fact() -> None:
    view = FeatureView(MemoryStore(), RULES.scoring)
    start = event("ev-1", started())
    first = fold(None, start, view)
    # The table write was lost with the crash; the fact was not: the same answer, never re-decided.
    again = fold(None, start, view)
    assert (again.status, again.body, again.facts) == (first.status, first.body, first.facts)
    assert again.state == first.state
    # With the table write kept, it is the same start again: the first answer, the same fact.
    replayed = fold(first.state, start, view)
    assert (replayed.body, replayed.facts) == (first.body, first.facts)


def test_an_end_folded_again_appends_its_settled_fact_again_and_another_end_does_not() -> None:
    view = FeatureView(MemoryStore(), RULES.scoring)
    opened = fold(None, event("ev-1", started()), view)
    assert opened.status == 200
    end = event("ev-2", ended())
    first = fold(opened.state, end, view)
    assert first.status == 200
    assert [(type(f).__name__, f.id) for f in first.facts] == [("CallSettled", "ev-2")]

    again = fold(first.state, end, view)
    assert (again.status, again.body, again.facts) == (200, first.body, first.facts)

    # A client's second end is a new event: a duplicate answer and no second settled fact.
    retry = fold(first.state, event("ev-3", ended()), view)
    assert (retry.status, retry.body, retry.facts) == (200, {**first.body, "duplicate": True}, [])


def test_a_fact_that_raised_an_alert_folded_again_raises_the_same_again() -> None:
    harness = Harness()
    account = HarnessAccount("acct_x")
    for i in range(7):
        body = started(call_id=f"r{i}", at=format_ms(AT - 60_000 + i * 1_000))
        assert harness.post(account, body, AT)[0] == 200
    raised = [a for a in harness.alerts if a.type == "caller.rate_exceeded"]
    assert len(raised) == 1
    number_key = "acct_x:+14155552671"
    window = harness.windows[number_key]
    (echo_key,) = [k for k, echo in harness.echoes.items() if list(echo.alerts) == raised]
    fact_id = echo_key.rsplit("|", 1)[1]
    # The crash lost the appends, not the window: the same fact again, as the refold meets it.
    again = detectors.observe(
        window,
        NumberTick(id=fact_id, account_id="acct_x", number="+14155552671", at=AT),
        RULES.detectors,
        RULES.scoring,
        harness.echoes_of(number_key),
    )
    assert again.alerts == list(harness.echoes[echo_key].alerts) and [a.id for a in again.alerts] == [raised[0].id]
    assert again.facts == list(harness.echoes[echo_key].facts)
    assert again.window is window


def test_a_failed_payment_folded_again_raises_the_same_alert_and_another_within_cooldown_none() -> None:
    payment = PaymentFailed(id="pay-1", account_id="acct_x", amount_cents=4900, attempt=1, at=AT)
    last, alert = billing.payment_failed(None, payment, RULES.detectors)
    assert alert is not None
    assert billing.payment_failed(last, payment, RULES.detectors) == (last, alert)
    later = PaymentFailed(id="pay-2", account_id="acct_x", amount_cents=4900, attempt=2, at=AT + 60_000)
    assert billing.payment_failed(last, later, RULES.detectors) == (last, None)


def test_a_capped_start_resets_at_the_end_of_the_day_it_was_received() -> None:
    # Happened late yesterday, received today: counted today, so the cap resets at today's end.
    received = 1_800_000_000_000 - 1_800_000_000_000 % 86_400_000 + 3_600_000
    body = {**started(), "at": format_ms(received - 2 * 3_600_000)}
    late = parse_event(body, Stamp("ev-cap", "acct_x", "watch", received), TimeBounds.of(RULES.limits))
    context = calls.StartContext(number_known=True, scored_today=RULES.plans.plan("watch").daily_starts)
    answer = calls.fold(None, late, context, RULES).body
    assert answer.capped and answer.cap.resets_at == format_ms(received - 3_600_000 + 86_400_000)


def test_a_start_folded_again_asks_for_its_listing_entry_though_its_row_is_unchanged() -> None:
    """After a kill the row can be the store's own while the index came back from an older changelog."""
    view = FeatureView(MemoryStore(), RULES.scoring)
    start = event("ev-1", started())
    first = fold(None, start, view)
    again = fold(first.state, start, view)
    assert again.state is None
    entry = calls.listing_entry(first.state, start, again)
    assert entry is not None and entry == calls.listing_entry(None, start, first)
    assert (entry.call_id, entry.number, entry.caller) == ("c1", "+14155552671", "+16465550123")
    end = event("ev-2", ended())
    assert calls.listing_entry(first.state, end, fold(first.state, end, view)) is None
    assert calls.listing_entry(None, end, fold(None, end, view)) is None
