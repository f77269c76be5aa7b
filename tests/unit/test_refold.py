"""An event folded again (its worker was killed after the fold and before its facts landed) gives the
same answer and appends the same facts again; on plain data, with the feature view in memory."""

from __future__ import annotations

from typing import Any

from callscreen.plans import plan_limits
from callscreen.settings import Settings
from callscreen.times import format_ms
from ingest.validation import validate_event
from processors import calls
from processors.features import FeatureView
from processors.policy import load_policy
from processors.store import MemoryStore

SETTINGS = Settings()
POLICY = load_policy(SETTINGS)
LIMITS = plan_limits(SETTINGS, "guard")
AT = 1_800_000_000_000


def record(event_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """The record the edge appends for `body`."""
    out = validate_event(body, AT, 300_000)
    out.update(id=event_id, account_id="acct-1", plan="guard", received_at=AT)
    if out["type"] == "call.started":
        out["trusted"] = False
    return out


def started(**fields: Any) -> dict[str, Any]:
    body = {"type": "call.started", "call_id": "c1", "to": "+14155552671", "from": "+16465550123"}
    return {**body, "at": format_ms(AT - 60_000), **fields}


def ended() -> dict[str, Any]:
    return {"type": "call.ended", "call_id": "c1", "at": format_ms(AT), "reason": "completed"}


def fold(state: dict[str, Any] | None, rec: dict[str, Any], view: FeatureView) -> calls.Outcome:
    """One fold whose facts the view applies, as the worker does before it appends them."""
    outcome = calls.handle(state, rec, view, POLICY, LIMITS)
    for fact in outcome.facts:
        view.apply(fact)
    return outcome


def test_a_refused_start_folded_again_appends_its_refusal_again() -> None:
    view = FeatureView(MemoryStore())
    start = record("ev-1", started(register=False))
    first = fold(None, start, view)
    assert (first.status, first.body) == (409, {"error": "not_protected"})
    assert [fact["kind"] for fact in first.facts] == ["call.refused"]
    again = fold(None, start, view)
    assert (again.status, again.body, again.facts) == (first.status, first.body, first.facts)


def test_an_end_folded_again_appends_its_settled_fact_again_and_another_end_does_not() -> None:
    view = FeatureView(MemoryStore())
    opened = fold(None, record("ev-1", started()), view)
    assert opened.status == 200
    end = record("ev-2", ended())
    first = fold(opened.state, end, view)
    assert first.status == 200
    assert [(fact["kind"], fact["id"], fact["duration_s"]) for fact in first.facts] == [("call.settled", "ev-2", 60)]

    again = fold(first.state, end, view)
    assert (again.status, again.body, again.facts) == (200, {**first.body, "duplicate": True}, first.facts)

    # A client's second end is a new event: a duplicate answer and no second settled fact.
    retry = fold(first.state, record("ev-3", ended()), view)
    assert (retry.status, retry.body, retry.facts) == (200, {**first.body, "duplicate": True}, [])
