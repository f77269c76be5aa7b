"""The outbound guard (decisions section 18): where an outbound start goes is scored, each signal at its
boundary, through the folds as the workers run them (`callscreen.testing.Harness`)."""

from __future__ import annotations

from html import unescape
from typing import Any

import pytest

from alerting import messages
from callscreen.testing import Account, Harness, as_sent
from domain.alerts import Alert, make_alert
from domain.outbound import (
    Outbound,
    OutboundError,
    Paused,
    evolve,
    folded,
    parse_settings,
    pause_record,
    pauses,
    trip,
)
from domain.rules import MIN_MS, SECOND_MS, ScoringRules
from domain.scoring import destination_numbers, one_ring, transfer_not_allowed
from domain.times import format_ms

NOW = 1_800_000_000_000
AGENT = "+14155552671"
US = "+12025550143"
CA = "+16135550123"
GB = "+442079460000"
RULES = ScoringRules()
PAUSED = Paused(alert_id="alrt_00000000000000000000", cause="number.spend_exceeded", number=AGENT, at=format_ms(NOW))


def dial(harness: Harness, account: Account, call_id: str, to: str, at: int = NOW, **attrs: Any) -> dict[str, Any]:
    body = {
        "type": "call.started",
        "call_id": call_id,
        "direction": "outbound",
        "from": AGENT,
        "to": to,
        "at": format_ms(at),
        "attrs": attrs,
    }
    status, answer = harness.post(account, body, at)
    assert status == 200, answer
    return dict(answer)


def inbound(harness: Harness, account: Account, call_id: str, caller: str, at: int, to: str = AGENT) -> None:
    body = {"type": "call.started", "call_id": call_id, "from": caller, "to": to, "at": format_ms(at)}
    assert harness.post(account, body, at)[0] == 200


def ended(harness: Harness, account: Account, call_id: str, at: int, reason: str) -> None:
    body = {"type": "call.ended", "call_id": call_id, "at": format_ms(at), "reason": reason}
    assert harness.post(account, body, at)[0] == 200


def test_a_destination_in_the_protected_numbers_country_is_allowed() -> None:
    answer = dial(Harness(), Account("acct_out"), "c1", US)
    assert (answer["action"], answer["reasons"]) == ("allow", [])
    assert (answer["checks"]["destination_numbers_10m"], answer["checks"]["one_rings_24h"]) == (1, 0)


def test_by_default_only_the_protected_numbers_countries_may_be_dialled() -> None:
    harness, account = Harness(), Account("acct_out")
    answer = dial(harness, account, "c1", GB)
    assert (answer["score"], answer["action"], answer["reasons"]) == (1.0, "reject", ["destination_not_allowed"])
    # A protected number in GB makes GB one of the account's countries.
    inbound(harness, account, "in1", US, NOW, to="+447400123456")
    assert dial(harness, account, "c2", GB)["reasons"] == []
    assert dial(harness, account, "c3", CA)["reasons"] == ["destination_not_allowed"]


def test_the_accounts_countries_replace_the_default() -> None:
    harness = Harness()
    account = Account("acct_out", outbound=Outbound(countries=["CA", "GB"]))
    assert dial(harness, account, "c1", CA)["reasons"] == []
    assert dial(harness, account, "c2", GB)["reasons"] == []
    assert dial(harness, account, "c3", US)["reasons"] == ["destination_not_allowed"]


@pytest.mark.parametrize(
    ("number", "reasons"),
    [
        ("+19005550100", ["premium_rate_destination"]),  # US premium rate
        ("+448431234567", ["premium_rate_destination"]),  # GB shared cost
        ("+445512345678", []),  # GB UAN
        ("+18005550100", []),  # US toll-free
    ],
)
def test_premium_rate_and_shared_cost_destinations(number: str, reasons: list[str]) -> None:
    account = Account("acct_out", outbound=Outbound(countries=["US", "GB"]))
    answer = dial(Harness(), account, "c1", number)
    assert answer["reasons"] == reasons
    assert answer["score"] == (0.85 if reasons else 0.0)


def test_an_inbound_premium_caller_keeps_its_own_reason() -> None:
    harness = Harness()
    body = {"type": "call.started", "call_id": "in1", "from": "+19005550100", "to": AGENT, "at": format_ms(NOW)}
    status, answer = harness.post(Account("acct_out"), body, NOW)
    assert (status, answer["reasons"]) == (200, ["premium_rate_caller"])
    assert "destination_numbers_10m" not in answer["checks"]


def test_transfer_list_entries_are_exact_numbers_or_prefixes() -> None:
    assert transfer_not_allowed(US, True, [])
    assert not transfer_not_allowed(US, False, [])
    assert not transfer_not_allowed(US, True, ["+1202"])
    assert not transfer_not_allowed(US, True, [US])
    assert transfer_not_allowed("+12025550144", True, [US])
    assert transfer_not_allowed(GB, True, ["+1202", US])


def test_a_transfer_goes_only_where_the_list_allows() -> None:
    harness = Harness()
    none_allowed = Account("acct_out")
    answer = dial(harness, none_allowed, "c1", US, transfer=True)
    assert (answer["score"], answer["action"], answer["reasons"]) == (1.0, "reject", ["transfer_not_allowed"])
    assert dial(harness, none_allowed, "c2", US, transfer=False)["reasons"] == []
    listed = Account("acct_listed", outbound=Outbound(transfer=["+1202555", "+16135550123"]))
    assert dial(harness, listed, "c3", US, transfer=True)["reasons"] == []
    assert dial(harness, listed, "c4", CA, transfer=True)["reasons"] == ["destination_not_allowed"]
    assert dial(harness, listed, "c5", "+19197770801", transfer=True)["reasons"] == ["transfer_not_allowed"]


def test_a_transfer_flag_must_be_a_boolean() -> None:
    body: dict[str, Any] = {"type": "call.started", "call_id": "c1", "direction": "outbound", "from": AGENT, "to": US}
    body["attrs"] = {"transfer": "yes"}
    status, answer = Harness().post(Account("acct_out"), body, NOW)
    assert (status, answer) == (400, {"error": "invalid_field", "field": "attrs.transfer"})


def test_the_fifth_distinct_number_under_one_prefix_in_ten_minutes_is_a_burst() -> None:
    harness, account = Harness(), Account("acct_out")
    for i in range(4):
        answer = dial(harness, account, f"c{i}", f"+12025550{i + 1}00", NOW + i * MIN_MS)
        assert answer["reasons"] == []
        assert answer["checks"]["destination_numbers_10m"] == i + 1
    fifth = dial(harness, account, "c4", "+12025550500", NOW + 4 * MIN_MS)
    assert (fifth["score"], fifth["action"], fifth["reasons"]) == (0.75, "review", ["destination_burst"])
    assert fifth["checks"]["destination_numbers_10m"] == 5
    (alert,) = [a for a in harness.alerts if a.type == "outbound.destination_burst"]
    assert (alert.severity, alert.subject) == ("threat", f"{AGENT}|+12025550")
    assert alert.data == {
        "number": AGENT,
        "call_id": "c4",
        "prefix": "+12025550",
        "numbers": [f"+12025550{i + 1}00" for i in range(5)],
        "count": 5,
        "window_min": 10,
    }
    # Within the cooldown the run grows without another alert.
    assert dial(harness, account, "c5", "+12025550600", NOW + 5 * MIN_MS)["reasons"] == ["destination_burst"]
    assert len([a for a in harness.alerts if a.type == "outbound.destination_burst"]) == 1


def test_a_burst_counts_distinct_numbers_inside_the_window_only() -> None:
    calls = [(NOW, "+12025550100"), (NOW + 1, "+12025550100"), (NOW + 2, "+12025550101"), (NOW + 3, "+12025559999")]
    prefix, numbers = destination_numbers(calls, "+12025550102", NOW + 10 * MIN_MS, RULES)
    # The first call is exactly ten minutes old: out of the window; the same number twice counts once.
    assert (prefix, numbers) == ("+12025550", ["+12025550100", "+12025550101", "+12025550102"])
    harness, account = Harness(), Account("acct_out")
    for i in range(4):
        dial(harness, account, f"c{i}", f"+12025550{i + 1}00", NOW + i * MIN_MS)
    late = dial(harness, account, "c4", "+12025550500", NOW + 10 * MIN_MS)
    assert (late["reasons"], late["checks"]["destination_numbers_10m"]) == ([], 4)


@pytest.mark.parametrize(("rang_s", "reasons"), [(5, ["callback_to_one_ring"]), (6, [])])
def test_calling_back_a_one_ring_number(rang_s: int, reasons: list[str]) -> None:
    harness, account = Harness(), Account("acct_out")
    inbound(harness, account, "in1", US, NOW)
    ended(harness, account, "in1", NOW + rang_s * SECOND_MS, "no-answer")
    answer = dial(harness, account, "c1", US, NOW + 60 * MIN_MS)
    assert answer["reasons"] == reasons
    assert answer["checks"]["one_rings_24h"] == len(reasons)
    assert answer["score"] == (0.6 if reasons else 0.0)


def test_a_one_ring_counts_for_a_day_and_only_unanswered() -> None:
    assert one_ring("inbound", False, NOW, NOW + 5 * SECOND_MS, RULES)
    assert not one_ring("inbound", True, NOW, NOW + 2 * SECOND_MS, RULES)
    assert not one_ring("outbound", False, NOW, NOW + 2 * SECOND_MS, RULES)
    harness, account = Harness(), Account("acct_out")
    inbound(harness, account, "in1", US, NOW)
    ended(harness, account, "in1", NOW + 2 * SECOND_MS, "canceled")
    day = 24 * 60 * MIN_MS
    assert dial(harness, account, "c1", US, NOW + 2 * SECOND_MS + day - 1)["reasons"] == ["callback_to_one_ring"]
    assert dial(harness, account, "c2", US, NOW + 2 * SECOND_MS + day)["reasons"] == []
    inbound(harness, account, "in2", CA, NOW)
    ended(harness, account, "in2", NOW + 2 * SECOND_MS, "ended")
    assert "callback_to_one_ring" not in dial(harness, account, "c3", CA, NOW + MIN_MS)["reasons"]


def test_a_paused_outbound_rejects_every_start_and_leaves_inbound_alone() -> None:
    harness, account = Harness(), Account("acct_out", outbound=Outbound(paused=PAUSED))
    answer = dial(harness, account, "c1", US)
    assert (answer["score"], answer["action"], answer["reasons"]) == (1.0, "reject", ["outbound_paused"])
    body = {"type": "call.started", "call_id": "in1", "from": US, "to": AGENT, "at": format_ms(NOW)}
    status, answer = harness.post(account, body, NOW)
    assert (status, answer["action"], answer["reasons"]) == (200, "allow", [])


def test_a_pause_stops_a_trusted_number_too() -> None:
    harness = Harness()
    trusted = Account("acct_out", trusted=frozenset({US}))
    assert dial(harness, trusted, "c1", US)["reasons"] == ["trusted"]
    answer = dial(harness, Account("acct_out", trusted=frozenset({US}), outbound=Outbound(paused=PAUSED)), "c2", US)
    assert (answer["score"], answer["action"], answer["reasons"]) == (1.0, "reject", ["outbound_paused"])


def test_settings_parse_field_by_field() -> None:
    settings = parse_settings({"countries": ["us", "CA"], "transfer": ["+1 415", "+44"]}, None)
    assert settings == Outbound(countries=["CA", "US"], transfer=["+1415", "+44"])
    assert parse_settings({"pause_on": "off"}, settings) == Outbound(
        countries=["CA", "US"], transfer=["+1415", "+44"], pause_on="off"
    )
    assert parse_settings({"countries": None}, settings).countries is None
    for body, field in [
        ([], "outbound"),
        ({"other": 1}, "other"),
        ({"countries": "US"}, "countries"),
        ({"countries": ["USA"]}, "countries"),
        ({"transfer": ["1415"]}, "transfer"),
        ({"transfer": ["+0415"]}, "transfer"),
        ({"pause_on": "warning"}, "pause_on"),
    ]:
        with pytest.raises(OutboundError) as refused:
            parse_settings(body, None)
        assert refused.value.field == field


def test_a_cause_on_an_outbound_number_pauses_once() -> None:
    assert pauses(None, "outbound.destination_burst", {})
    assert pauses(None, "number.spend_exceeded", {"direction": "outbound"})
    assert not pauses(None, "number.spend_exceeded", {})
    assert not pauses(None, "number.volume_exceeded", {"direction": "outbound"})
    assert not pauses(Outbound(pause_on="off"), "outbound.destination_burst", {})
    record = pause_record("acct_out", PAUSED.alert_id, PAUSED.cause, AGENT, PAUSED.at)
    paused = evolve(None, record)
    assert paused == Outbound(paused=PAUSED)
    assert not pauses(paused, "outbound.destination_burst", {})
    # A second pause record keeps the first cause; a resume ends it.
    other = pause_record("acct_out", "alrt_11111111111111111111", "outbound.destination_burst", AGENT, PAUSED.at)
    assert evolve(paused, other) is paused
    assert evolve(paused, {"kind": "outbound.resumed", "account_id": "acct_out"}) is None


def cause(alert_type: str, at: int, **data: Any) -> Alert:
    return make_alert("acct_out", alert_type, AGENT, at, at, {"number": AGENT, **data})


def test_the_kill_switch_trips_once_and_cools_down_after_a_resume() -> None:
    cooldown = 15 * MIN_MS
    burst = cause("outbound.destination_burst", NOW)
    tripped = trip(None, burst, cooldown)
    assert tripped is not None and tripped.alert is not None
    assert tripped.record["kind"] == "outbound.paused"
    assert tripped.record["paused"] == {
        "alert_id": burst.id,
        "cause": "outbound.destination_burst",
        "number": AGENT,
        "at": burst.created_at,
    }
    paused = tripped.alert
    assert (paused.type, paused.severity, paused.subject) == ("outbound.paused", "critical", "acct_out")
    assert paused.data == {"number": AGENT, "cause": "outbound.destination_burst", "alert_id": burst.id}
    # Paused: the next cause changes nothing; the same alert again makes the same record and alert.
    assert trip(tripped.state, cause("number.spend_exceeded", NOW + 1, direction="outbound"), cooldown) is None
    assert trip(None, burst, cooldown) == tripped
    # An inbound spend, or the switch off, pauses nothing.
    assert trip(None, cause("number.spend_exceeded", NOW), cooldown) is None
    off = folded(None, {"kind": "outbound.set", "outbound": {"countries": None, "transfer": [], "pause_on": "off"}})
    assert trip(off, burst, cooldown) is None
    # Resumed within the cooldown, the next cause pauses again without a second alert; after it, with one.
    resumed = folded(tripped.state, {"kind": "outbound.resumed", "account_id": "acct_out"})
    assert resumed.settings is None
    again = trip(resumed, cause("outbound.destination_burst", NOW + cooldown - 1), cooldown)
    assert again is not None and again.alert is None and again.state.settings is not None
    later = trip(resumed, cause("outbound.destination_burst", NOW + cooldown), cooldown)
    assert later is not None and later.alert is not None


@pytest.mark.parametrize("alert_type", ["outbound.destination_burst", "outbound.paused"])
def test_both_alert_types_go_through_every_channel(alert_type: str) -> None:
    data: dict[str, Any] = {"number": AGENT, "cause": "outbound.destination_burst", "alert_id": PAUSED.alert_id}
    if alert_type == "outbound.destination_burst":
        data = {"number": AGENT, "call_id": "c4", "prefix": "+12025550", "numbers": [US], "count": 5, "window_min": 10}
    alert = as_sent(make_alert("acct_out", alert_type, AGENT, NOW, NOW, data))
    about = messages.about(alert, "https://dash.example")
    assert about.action == messages.ACTIONS[alert_type]
    email = messages.email(about, "alerts@callscreen.example", "owner@example.com")
    plain, html = (part.get_content() for part in email.iter_parts())
    assert alert_type in email["Subject"] and about.action in plain and about.action in unescape(html)
    text = messages.text(about)
    assert len(text) <= messages.TEXT_MAX and text.startswith(f"Callscreen {alert.get('severity')}: {alert_type}")
    assert about.action in unescape(messages.voice_twiml(about))
