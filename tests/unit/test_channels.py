"""Alert channels as plain rules (domain.channels, domain.commands.set_channel, domain.accounts) and what
their messages say (alerting.messages): floors, plans, limits, and the text, voice and email bodies."""

from __future__ import annotations

import email
from email.message import EmailMessage
from email.policy import default
from typing import Any

import msgspec
import pytest

from alerting.messages import TEXT_MAX, about, spoken, text, voice_twiml
from alerting.messages import email as email_message
from domain import commands
from domain.accounts import Account, evolve, stamp
from domain.alert_budget import HOUR_MS, AlertBudget
from domain.alerts import AlertTestRequest, requested_test
from domain.channels import Channel, Send, Skip, fan_out, on_plan, reaches

ALERT: dict[str, Any] = {
    "id": "alrt_AAAAAAAAAAAAAAAAAAAA",
    "type": "caller.rate_exceeded",
    "account_id": "acct_AAAAAAAAAAAAAAAA",
    "created_at": "2026-11-24T09:30:00.000Z",
    "severity": "threat",
    "data": {"number": "+14155550100", "caller": "+14155550199"},
}


def account(plan: str) -> Account:
    created = evolve(None, stamp(commands.create_account(plan, "t").record, 0))
    assert created is not None
    return created


def then(before: Account, change: commands.Change) -> Account:
    after = evolve(before, stamp(change.record, 0))
    assert after is not None
    return after


@pytest.mark.parametrize(
    ("floor", "severity", "reached"),
    [
        ("info", "info", True),
        ("threat", "info", False),
        ("threat", "threat", True),
        ("threat", "critical", True),
        ("critical", "threat", False),
        ("critical", "critical", True),
    ],
)
def test_a_channel_gets_alerts_at_or_above_its_floor(floor: str, severity: str, reached: bool) -> None:
    assert reaches(floor, severity) is reached


def test_fan_out_sends_skips_below_the_floor_and_where_the_deployment_lacks_the_channel() -> None:
    channels = {
        "email": Channel(("a@example.com", "b@example.com"), "threat"),
        "text": Channel(("+14155550101",), "critical"),
        "voice": Channel(("+14155550102",), "threat"),
    }
    planned = fan_out(channels, "threat", frozenset({"email", "text"}))
    assert planned == [
        Send("email", "a@example.com"),
        Send("email", "b@example.com"),
        Skip("text", "+14155550101", "floor"),
        Skip("voice", "+14155550102", "unavailable"),
    ]
    assert fan_out({}, "critical", frozenset({"email"})) == []


def test_set_channel_normalises_and_keeps_the_default_floor() -> None:
    guard = account("guard")
    change = commands.set_channel(guard, "text", ["+1 415 555 0101", "+14155550101"])
    assert change.shown == {"channel": "text", "to": ["+14155550101"], "floor": "critical"}
    assert then(guard, change).channels == {"text": Channel(("+14155550101",), "critical")}
    email_change = commands.set_channel(guard, "email", ["ops@example.com"])
    assert email_change.record["floor"] == "threat"


@pytest.mark.parametrize(
    ("channel", "to", "floor", "code"),
    [
        ("fax", ["+14155550101"], None, "invalid_channel"),
        ("email", [f"o{i}@example.com" for i in range(6)], None, "too_many_destinations"),
        ("email", ["ops@example.com"], "urgent", "invalid_floor"),
        ("email", ["not an address"], None, "invalid_email"),
        ("voice", ["0101"], None, "invalid_number"),
    ],
)
def test_set_channel_refusals(channel: str, to: list[str], floor: str | None, code: str) -> None:
    with pytest.raises(commands.Refused) as refused:
        commands.set_channel(account("guard"), channel, to, floor)
    assert str(refused.value) == code


def test_a_watch_account_gets_email_but_not_text_or_voice() -> None:
    watch = account("watch")
    assert commands.set_channel(watch, "email", ["ops@example.com"]).shown["to"] == ["ops@example.com"]
    for channel in ("text", "voice"):
        with pytest.raises(commands.Refused) as refused:
            commands.set_channel(watch, channel, ["+14155550101"])
        assert str(refused.value) == "plan_required"
    # Turning a channel off needs no plan.
    assert commands.set_channel(watch, "text", []).shown == {"channel": "text", "to": [], "floor": None}


def test_a_downgrade_to_watch_turns_text_and_voice_off_and_an_upgrade_does_not_bring_them_back() -> None:
    guard = account("guard")
    for channel, to in (("email", "ops@example.com"), ("text", "+14155550101"), ("voice", "+14155550102")):
        guard = then(guard, commands.set_channel(guard, channel, [to]))
    watch = then(guard, commands.set_plan(guard, "watch"))
    assert set(watch.channels) == {"email"}
    assert then(watch, commands.set_plan(watch, "guard")).channels == watch.channels
    assert on_plan(guard.channels, "watch") == watch.channels


def test_an_empty_list_turns_a_channel_off() -> None:
    guard = account("guard")
    guard = then(guard, commands.set_channel(guard, "email", ["ops@example.com"], "critical"))
    assert then(guard, commands.set_channel(guard, "email", [])).channels == {}


def test_a_text_is_at_most_160_characters_and_keeps_the_link_whole() -> None:
    many = {**ALERT, "data": {"numbers": [f"+1415555{i:04d}" for i in range(40)]}}
    for alert in (ALERT, many):
        body = text(about(alert, "https://callscreen.example"))
        assert len(body) <= TEXT_MAX
        assert body.endswith("https://callscreen.example/dashboard/alerts/alrt_AAAAAAAAAAAAAAAAAAAA")
    assert text(about(ALERT, "https://x.example")) == (
        "Callscreen threat: caller.rate_exceeded +14155550100 +14155550199 2026-11-24 09:30 UTC "
        "https://x.example/dashboard/alerts/alrt_AAAAAAAAAAAAAAAAAAAA"
    )


def test_a_voice_call_says_the_alert_twice() -> None:
    twiml = voice_twiml(about(ALERT, "https://x.example"))
    said = spoken(about(ALERT, "https://x.example"))
    assert said == (
        "Callscreen threat alert: caller rate exceeded about 1 4 1 5 5 5 5 0 1 0 0, "
        "1 4 1 5 5 5 5 0 1 9 9, at 2026-11-24 09:30 UTC."
    )
    assert twiml.count(f"<Say>{said}</Say>") == 2
    assert twiml.startswith('<?xml version="1.0" encoding="UTF-8"?><Response>')


def test_an_email_is_multipart_text_and_html_with_the_link() -> None:
    message = email_message(about(ALERT, "https://x.example/"), "alerts@callscreen.example", "ops@example.com")
    parsed = email.message_from_bytes(message.as_bytes(), policy=default)
    assert isinstance(parsed, EmailMessage)
    assert parsed["Subject"] == "[Callscreen] threat: caller.rate_exceeded on +14155550100"
    assert (parsed["From"], parsed["To"]) == ("alerts@callscreen.example", "ops@example.com")
    assert parsed.get_content_type() == "multipart/alternative"
    plain, html = (part.get_content() for part in parsed.iter_parts())
    link = "https://x.example/dashboard/alerts/alrt_AAAAAAAAAAAAAAAAAAAA"
    for body in (plain, html):
        assert link in body
        assert "+14155550100, +14155550199" in body
        assert "2026-11-24 09:30 UTC" in body
    assert f'href="{link}"' in html


def test_the_hourly_caps_count_by_the_alerts_own_time() -> None:
    texts = AlertBudget(20, HOUR_MS)
    start = 1_000_000_000
    admitted = [texts.admit("acct", f"a{i}|+1", start + i * 60_000) for i in range(21)]
    assert admitted == [True] * 20 + [False]
    # An hour after the first, one slot is free again.
    assert texts.admit("acct", "late|+1", start + HOUR_MS)
    assert not texts.admit("acct", "late2|+1", start + HOUR_MS)
    assert texts.admit("other", "a0|+1", start)


def test_a_test_request_raises_one_critical_alert_test_with_an_id_from_the_request() -> None:
    owner = account("watch")
    record = stamp(commands.request_test_alert(owner, "prs_AAAAAAAAAAAAAAAA", "o@example.test").record, 1_000)
    request = msgspec.convert(record, AlertTestRequest)
    alert = requested_test(request)
    assert (alert.type, alert.severity, alert.account_id) == ("alert.test", "critical", owner.id)
    assert (alert.created_at, alert.subject) == ("1970-01-01T00:00:01.000Z", "prs_AAAAAAAAAAAAAAAA")
    assert alert.data == {"requested_by": "o@example.test"}
    assert requested_test(request) == alert
    second = stamp(commands.request_test_alert(owner, "prs_AAAAAAAAAAAAAAAA", "o@example.test").record, 1_000)
    again = msgspec.convert(second, AlertTestRequest)
    assert requested_test(again).id != alert.id
    assert evolve(owner, record) == owner  # the accounts view ignores the request
