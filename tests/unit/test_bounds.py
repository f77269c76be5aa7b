"""No fold builds a value over `MAX_VALUE_BYTES`, whatever hostile events arrive; a turn costs the same
whatever the call's length (its state stops growing)."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callscreen.testing import Account, Harness
from domain.rules import HOUR_MS, SECOND_MS
from domain.store import MAX_VALUE_BYTES, MemoryStore
from domain.times import format_ms

NOW = 1_800_000_000_000
GUARD = Account("acct_flood")
TO = "+14155552671"
LONGEST = {
    "geo": {"city": "c" * 128, "region": "r" * 128, "zip": "z" * 128, "country": "US"},
    "caller_name": "n" * 128,
    "carrier": "k" * 128,
    "forwarded_from": "+441632960961",
    "unknown": "u" * 2000,
}


def values(harness: Harness) -> list[bytes]:
    """Everything a worker would write: call records, tables, the feature view, the detector windows."""
    stored = [*harness.calls.values(), *harness.tables.values(), *harness.windows.values(), *harness.echoes.values()]
    view = harness.view.store
    assert isinstance(view, MemoryStore)
    return [msgspec.json.encode(v) for v in stored] + list(view.data.values())


def test_a_flood_of_the_largest_legal_events_stays_under_the_bound() -> None:
    harness = Harness()
    for i in range(1500):
        at = NOW - HOUR_MS + i * 2 * SECOND_MS
        start = {"type": "call.started", "call_id": f"f{i}", "to": TO, "from": f"+1212{i:07d}", "attrs": LONGEST}
        assert harness.post(GUARD, {**start, "at": format_ms(at)}, NOW)[0] == 200
        ended = {"type": "call.ended", "call_id": f"f{i}", "at": format_ms(at + SECOND_MS), "attrs": LONGEST}
        assert harness.post(GUARD, ended, NOW)[0] == 200
    largest = max(len(v) for v in values(harness))
    assert largest < MAX_VALUE_BYTES, largest


def test_a_call_of_3000_turns_keeps_a_state_of_constant_size() -> None:
    harness = Harness()
    at = NOW - HOUR_MS
    start = {"type": "call.started", "call_id": "long", "to": TO, "from": "+12125550123", "at": format_ms(at)}
    harness.post(GUARD, start, NOW)
    sizes = []
    for turn in range(3000):
        role = "user" if turn % 2 else "agent"
        body = {"type": "turn.ended", "call_id": "long", "role": role, "at": format_ms(at + turn * 500)}
        assert harness.post(GUARD, {**body, "text": f"turn {turn % 7}"}, NOW)[0] == 200
        if turn in (500, 2999):
            sizes.append(len(msgspec.json.encode(harness.calls["acct_flood:long"])))
    assert sizes[1] <= sizes[0] * 1.1, sizes


texts = st.text(max_size=300)
hostile_attrs = st.dictionaries(
    st.sampled_from(["geo", "perf", "tokens", "caller_name", "carrier", "attestation", "x", "y"]),
    st.one_of(
        texts,
        st.integers(),
        st.floats(allow_nan=True),
        st.none(),
        st.dictionaries(st.sampled_from(["city", "zip", "in", "turn_ms", "street"]), st.one_of(texts, st.integers())),
    ),
)
hostile_body = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["call.started", "call.ended", "turn.started", "turn.ended", "interruption"]),
        "call_id": st.sampled_from(["a", "b", "c", "d"]),
        "to": st.just(TO),
        "from": st.sampled_from(["+12125550123", "+447911123456", "bogus"]),
        "role": st.sampled_from(["user", "agent", "x"]),
        "at": st.integers(min_value=NOW - 500 * 86_400_000, max_value=NOW + 600_000).map(format_ms),
    },
    optional={
        "attrs": hostile_attrs,
        "cost": st.one_of(st.floats(), st.integers()),
        "quiet": st.booleans(),
        "text": texts,
    },
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(hostile_body, min_size=1, max_size=40))
def test_hostile_events_are_answered_and_bounded(bodies: list[dict[str, Any]]) -> None:
    harness = Harness()
    for body in bodies:
        status, _ = harness.post(GUARD, body, NOW)
        assert status in (200, 400, 402, 404, 409), (status, body)
    assert all(len(v) < MAX_VALUE_BYTES for v in values(harness))
