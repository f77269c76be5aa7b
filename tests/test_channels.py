"""Email, text and voice alerts through the real pipeline (docs/api.md, Alert channels): a real SMTP server
(aiosmtpd) and a loopback HTTPS stand-in for the carrier's messaging and calls APIs."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import aiohttp
import jsonschema
import orjson
import pytest
import trustme
from aiohttp import web

import schemas
from callscreen.admin import Admin
from domain.times import format_ms
from infra.clock import now_ms
from tests.receiver import Receiver, https_site, receiver_env
from tests.service import (
    AccountKeys,
    RunningService,
    create_account,
    rebuild,
    role_pids,
    running_service,
    settled,
    wait_for_status,
)
from tests.smtp_server import SmtpServer, smtp_server
from tests.topics import read_topic

pytestmark = [pytest.mark.pipeline, pytest.mark.slow]

CARRIER_SID = "AC" + "2" * 32
CARRIER_TOKEN = "carrier-token-for-channel-tests"
SENDER = "+15005550006"
EMAIL_FROM = "alerts@callscreen.test"
EMAIL_TIMEOUT_S = 5.0
NUMBER = "+14155552671"


@dataclass
class Carrier:
    """Twilio's "create a message" and "create a call": checks basic auth, keeps each form, answers 201
    with the JSON resource as Twilio does (401 with Twilio's error body for wrong credentials)."""

    url: str = ""
    messages: list[dict[str, str]] = field(default_factory=list)
    calls: list[dict[str, str]] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != aiohttp.encode_basic_auth(CARRIER_SID, CARRIER_TOKEN):
            return web.json_response({"code": 20003, "message": "Authenticate", "status": 401}, status=401)
        if request.content_type != "application/x-www-form-urlencoded":
            return web.json_response({"code": 20001, "message": "form expected", "status": 400}, status=400)
        form = {name: values[0] for name, values in parse_qs((await request.read()).decode()).items()}
        base = f"/2010-04-01/Accounts/{CARRIER_SID}"
        if request.path == f"{base}/Messages.json":
            self.messages.append(form)
            sid = f"SM{len(self.messages):032d}"
            answer = {"sid": sid, "status": "queued", "to": form["To"], "body": form["Body"]}
            return web.json_response(answer, status=201)
        if request.path == f"{base}/Calls.json":
            self.calls.append(form)
            return web.json_response({"sid": f"CA{len(self.calls):032d}", "status": "queued"}, status=201)
        return web.json_response({"code": 20404, "message": "not found", "status": 404}, status=404)

    def texts_to(self, number: str) -> list[str]:
        return [form["Body"] for form in self.messages if form["To"] == number]

    def calls_to(self, number: str) -> list[str]:
        return [form["Twiml"] for form in self.calls if form["To"] == number]


@pytest.fixture(scope="module")
async def smtp(webhook_ca: tuple[trustme.CA, Path]) -> AsyncIterator[SmtpServer]:
    """STARTTLS with a certificate from the CA the service trusts (`receiver_env`); its URL is plain smtp://."""
    async with smtp_server(webhook_ca[0]) as server:
        yield server


@pytest.fixture(scope="module")
async def carrier(webhook_ca: tuple[trustme.CA, Path]) -> AsyncIterator[Carrier]:
    stand_in = Carrier()
    async with https_site(webhook_ca[0], stand_in.handle) as url:
        stand_in.url = url
        yield stand_in


@pytest.fixture(scope="module")
def channels_service(
    kafka: str,
    tmp_path_factory: pytest.TempPathFactory,
    webhook_ca: tuple[trustme.CA, Path],
    smtp: SmtpServer,
    carrier: Carrier,
) -> Iterator[RunningService]:
    env = {
        **receiver_env(webhook_ca[1]),
        "CALLSCREEN_SMTP_URL": smtp.url,
        "CALLSCREEN_EMAIL_FROM": EMAIL_FROM,
        "CALLSCREEN_EMAIL_TIMEOUT_S": str(EMAIL_TIMEOUT_S),
        "CALLSCREEN_TWILIO_API_BASE": carrier.url,
        "CALLSCREEN_TWILIO_ACCOUNT_SID": CARRIER_SID,
        "CALLSCREEN_TWILIO_AUTH_TOKEN": CARRIER_TOKEN,
        "CALLSCREEN_TWILIO_FROM": SENDER,
    }
    with running_service(tmp_path_factory.mktemp("channels") / "data", kafka, env=env) as running:
        yield running


async def set_channel(service: RunningService, account: AccountKeys, channel: str, *to: str, floor: str = "") -> None:
    async with Admin(service.settings) as admin:
        await admin.channel_set(account.account_id, channel, list(to), floor or None)


async def raise_alerts(
    http: aiohttp.ClientSession, service: RunningService, account: AccountKeys, count: int, tag: int
) -> None:
    """`count` caller.rate_exceeded alerts (threat): six calls each from callers far apart, in the last five
    minutes (recent enough that no call is open long enough for `call.long_running`)."""
    base = now_ms() - 300_000
    for n in range(count):
        caller = f"+44791{(tag * 7_919 + n * 104_729) % 1_000_000:06d}"
        for i in range(6):
            body = {
                "type": "call.started",
                "call_id": f"c{tag}-{n}-{i}",
                "to": NUMBER,
                "from": caller,
                "at": format_ms(base + n * 10_000 + i * 1000),
            }
            async with http.post(f"{service.base_url}/v1/events", json=body, headers=account.headers) as r:
                assert r.status == 200, await r.text()


async def rate_alerts(
    http: aiohttp.ClientSession, service: RunningService, account: AccountKeys, kind: str = "caller.rate_exceeded"
) -> list[Any]:
    """The account's alerts of one type (every type with `kind=""`)."""
    url = f"{service.base_url}/v1/alerts?limit=100" + (f"&type={kind}" if kind else "")
    async with http.get(url, headers=account.headers) as r:
        assert r.status == 200
        return list((await r.json())["data"])


async def channel_records(service: RunningService, account: AccountKeys, alert_id: str = "") -> list[dict[str, Any]]:
    """The account's `channel.*` records on the deliveries topic (one alert's with `alert_id`)."""
    records = [orjson.loads(r.value) for r in await read_topic(service.settings, service.settings.topic("deliveries"))]
    return [
        r
        for r in records
        if r.get("account_id") == account.account_id
        and r["kind"].startswith("channel.")
        and r["alert_id"] == (alert_id or r["alert_id"])
    ]


def plain_text(message: EmailMessage) -> str:
    part = message.get_body(("plain",))
    assert isinstance(part, EmailMessage)
    return str(part.get_content())


async def until(predicate: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not await predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.1)


async def every_message_settled(service: RunningService, account: AccountKeys, expected: int) -> None:
    """Until at least `expected` (alert, channel, destination) have records, each its last one: skipped,
    or an outcome; then until `GET /v1/alerts` shows them (the worker folds the alerts and the deliveries
    topics on its own, after the alerting role appended to them)."""
    settled: list[dict[str, Any]] = []

    async def done() -> bool:
        records = await channel_records(service, account)
        started = {(r["alert_id"], r["channel"], r["to"]) for r in records}
        ended = {(r["alert_id"], r["channel"], r["to"]) for r in records if r["kind"] != "channel.attempt"}
        settled[:] = records
        return len(started) >= expected and started == ended

    await until(done, 30)
    shown = {
        (r["alert_id"], r["channel"]): any(
            o.get("delivered") for o in settled if o["alert_id"] == r["alert_id"] and o["channel"] == r["channel"]
        )
        for r in settled
    }
    async with aiohttp.ClientSession() as http:

        async def listed() -> bool:
            delivered = {
                alert["id"]: alert["delivered"] for alert in await rate_alerts(http, service, account, kind="")
            }
            return all(delivered.get(alert_id, {}).get(channel) is sent for (alert_id, channel), sent in shown.items())

        await until(listed, 30)


async def test_an_alert_email_is_multipart_text_and_html_with_the_link(
    channels_service: RunningService, smtp: SmtpServer, http: aiohttp.ClientSession
) -> None:
    account = await create_account(channels_service.settings, http, channels_service.base_url, plan="watch")
    await set_channel(channels_service, account, "email", "ops@owner.test", "oncall@owner.test")
    await raise_alerts(http, channels_service, account, 1, tag=1)
    await every_message_settled(channels_service, account, 2)
    (alert,) = await rate_alerts(http, channels_service, account)
    assert alert["delivered"] == {"webhook": False, "email": True}
    link = f"{channels_service.base_url}/dashboard/alerts/{alert['id']}"
    # Over STARTTLS, which a plain smtp:// URL requires.
    assert [mail.tls for mail in smtp.received if alert["id"] in plain_text(mail.message)] == [True, True]
    for address in ("ops@owner.test", "oncall@owner.test"):
        (message,) = smtp.to(address)
        assert message["From"] == EMAIL_FROM
        assert message["To"] == address
        assert message["Subject"] == f"[Callscreen] threat: caller.rate_exceeded on {NUMBER}"
        assert message.get_content_type() == "multipart/alternative"
        plain, html = message.iter_parts()
        assert (plain.get_content_type(), html.get_content_type()) == ("text/plain", "text/html")
        for part in (plain, html):
            body = part.get_content()
            assert "caller.rate_exceeded" in body and "threat" in body and NUMBER in body
            assert alert["created_at"][:10] in body
            assert link in body
        assert f'href="{link}"' in html.get_content()
    records = [
        (r["kind"], r["to"], r.get("delivered")) for r in await channel_records(channels_service, account, alert["id"])
    ]
    assert sorted(records) == [
        ("channel.attempt", "oncall@owner.test", None),
        ("channel.attempt", "ops@owner.test", None),
        ("channel.outcome", "oncall@owner.test", True),
        ("channel.outcome", "ops@owner.test", True),
    ]


async def test_a_critical_floor_skips_a_threat(
    channels_service: RunningService, smtp: SmtpServer, http: aiohttp.ClientSession
) -> None:
    account = await create_account(channels_service.settings, http, channels_service.base_url)
    await set_channel(channels_service, account, "email", "floor@owner.test", floor="critical")
    await raise_alerts(http, channels_service, account, 1, tag=2)
    await every_message_settled(channels_service, account, 1)
    (alert,) = await rate_alerts(http, channels_service, account)
    assert alert["delivered"] == {"webhook": False, "email": False}
    records = await channel_records(channels_service, account, alert["id"])
    assert [(r["kind"], r["channel"], r["to"], r["reason"]) for r in records] == [
        ("channel.skipped", "email", "floor@owner.test", "floor")
    ]
    assert smtp.to("floor@owner.test") == []


async def test_a_watch_account_is_refused_text_and_a_downgrade_turns_it_off(
    channels_service: RunningService, carrier: Carrier, http: aiohttp.ClientSession
) -> None:
    service = channels_service
    watch = await create_account(service.settings, http, service.base_url, plan="watch")
    command = [sys.executable, "-m", "callscreen.cli", "channel", "set", "--account", watch.account_id]
    command += ["--channel", "text", "--to", "+14155550123", "--data-dir", str(service.data_dir)]
    done = await asyncio.to_thread(subprocess.run, command, capture_output=True, env={**os.environ, **service.env})
    assert done.returncode != 0 and done.stdout == b""
    assert orjson.loads(done.stderr) == {"error": "plan_required"}

    guard = await create_account(service.settings, http, service.base_url)
    await set_channel(service, guard, "text", "+14155550124", floor="threat")
    async with Admin(service.settings) as admin:
        await admin.plan_set(guard.account_id, "watch")
    await raise_alerts(http, service, guard, 1, tag=3)
    await settled(service.settings)
    (alert,) = await rate_alerts(http, service, guard)
    assert alert["delivered"] == {"webhook": False}
    assert await channel_records(service, guard) == []
    assert carrier.texts_to("+14155550124") == []


async def test_a_refusing_and_a_hanging_smtp_server_each_get_their_outcome(
    channels_service: RunningService, smtp: SmtpServer, http: aiohttp.ClientSession
) -> None:
    account = await create_account(channels_service.settings, http, channels_service.base_url)
    await set_channel(channels_service, account, "email", "refuse@owner.test", "hang@owner.test")
    await raise_alerts(http, channels_service, account, 1, tag=4)
    await every_message_settled(channels_service, account, 2)
    (alert,) = await rate_alerts(http, channels_service, account)
    assert alert["delivered"] == {"webhook": False, "email": False}
    records = await channel_records(channels_service, account, alert["id"])
    outcomes = {r["to"]: r for r in records if r["kind"] == "channel.outcome"}
    refused, hung = outcomes["refuse@owner.test"], outcomes["hang@owner.test"]
    assert (refused["delivered"], refused["status"], refused["error"]) == (False, 550, "smtp_550")
    assert (hung["delivered"], hung["status"], hung["error"]) == (False, None, "timeout")
    assert EMAIL_TIMEOUT_S * 1000 <= hung["duration_ms"] < EMAIL_TIMEOUT_S * 1000 + 1000
    # The hanging server did get the message; it never answered for it.
    assert len(smtp.to("hang@owner.test")) == 1


async def test_texts_and_voice_calls_through_the_carrier_api(
    channels_service: RunningService, carrier: Carrier, http: aiohttp.ClientSession
) -> None:
    account = await create_account(channels_service.settings, http, channels_service.base_url)
    await set_channel(channels_service, account, "text", "+14155550131", "+14155550132", floor="threat")
    await set_channel(channels_service, account, "voice", "+14155550133", floor="threat")
    await raise_alerts(http, channels_service, account, 1, tag=5)
    await every_message_settled(channels_service, account, 3)
    (alert,) = await rate_alerts(http, channels_service, account)
    assert alert["delivered"] == {"webhook": False, "text": True, "voice": True}
    link = f"{channels_service.base_url}/dashboard/alerts/{alert['id']}"
    for number in ("+14155550131", "+14155550132"):
        (body,) = carrier.texts_to(number)
        assert len(body) <= 160
        assert body.startswith("Callscreen threat: caller.rate_exceeded ") and body.endswith(link)
    sent = [form for form in carrier.messages if form["To"] == "+14155550131"]
    assert set(sent[0]) == {"To", "From", "Body"} and sent[0]["From"] == SENDER
    (twiml,) = carrier.calls_to("+14155550133")
    (form,) = [form for form in carrier.calls if form["To"] == "+14155550133"]
    assert set(form) == {"To", "From", "Twiml"} and form["From"] == SENDER
    said = twiml.split("<Say>")[1].split("</Say>")[0]
    assert said.startswith("Callscreen threat alert: caller rate exceeded")
    assert twiml.count(f"<Say>{said}</Say>") == 2
    records = await channel_records(channels_service, account, alert["id"])
    outcomes = [r for r in records if r["kind"] == "channel.outcome"]
    assert sorted((r["channel"], r["status"], r["delivered"]) for r in outcomes) == [
        ("text", 201, True),
        ("text", 201, True),
        ("voice", 201, True),
    ]


async def test_past_20_texts_and_5_voice_calls_an_hour_the_rest_are_skipped_for_rate(
    channels_service: RunningService, carrier: Carrier, http: aiohttp.ClientSession
) -> None:
    account = await create_account(channels_service.settings, http, channels_service.base_url)
    await set_channel(channels_service, account, "text", "+14155550141", floor="info")
    await set_channel(channels_service, account, "voice", "+14155550142", floor="info")
    await raise_alerts(http, channels_service, account, 22, tag=6)
    await settled(channels_service.settings)
    assert len(await rate_alerts(http, channels_service, account)) == 22
    # Every alert counts against the caps, whatever its type.
    raised = len(await rate_alerts(http, channels_service, account, kind=""))
    await every_message_settled(channels_service, account, 2 * raised)
    records = await channel_records(channels_service, account)
    final = [r for r in records if r["kind"] in ("channel.outcome", "channel.skipped")]
    by_channel = {
        channel: sorted((r["kind"], r.get("reason")) for r in final if r["channel"] == channel)
        for channel in ("text", "voice")
    }
    assert by_channel["text"] == [("channel.outcome", None)] * 20 + [("channel.skipped", "rate")] * (raised - 20)
    assert by_channel["voice"] == [("channel.outcome", None)] * 5 + [("channel.skipped", "rate")] * (raised - 5)
    assert len(carrier.texts_to("+14155550141")) == 20
    assert len(carrier.calls_to("+14155550142")) == 5


async def test_a_held_smtp_server_holds_up_no_webhook_and_no_other_account(
    channels_service: RunningService, smtp: SmtpServer, receiver: Receiver, http: aiohttp.ClientSession
) -> None:
    service = channels_service
    smtp.release.clear()
    slow = await create_account(service.settings, http, service.base_url)
    held_at = ("hold@owner.test", "hold@second.test")
    await set_channel(service, slow, "email", *held_at)
    body = {"alert_webhook_url": f"{receiver.url}/ok/{slow.account_id}"}
    async with http.patch(f"{service.base_url}/v1/account", json=body, headers=slow.headers) as r:
        assert r.status == 200
    await raise_alerts(http, service, slow, 1, tag=9)

    async def slow_email_held_and_webhook_delivered() -> bool:
        alerts = await rate_alerts(http, service, slow)
        if not alerts or not alerts[0]["delivered"]["webhook"]:
            return False
        return all(any(alerts[0]["id"] in plain_text(m) for m in smtp.to(a)) for a in held_at)

    await until(slow_email_held_and_webhook_delivered, 20)
    (held,) = await rate_alerts(http, service, slow)

    other = await create_account(service.settings, http, service.base_url)
    await set_channel(service, other, "email", "fair@owner.test")
    await raise_alerts(http, service, other, 1, tag=10)
    await every_message_settled(service, other, 1)
    (alert,) = await rate_alerts(http, service, other)
    assert alert["delivered"]["email"] is True
    assert [alert["id"] in plain_text(m) for m in smtp.to("fair@owner.test")] == [True]
    # Both of the slow account's emails were still held when the other account's was sent: neither has an
    # outcome, or (a held message times out after EMAIL_TIMEOUT_S on a busy machine) only a later one.
    (sent,) = [r for r in await channel_records(service, other, alert["id"]) if r["kind"] == "channel.outcome"]
    outcomes = [r for r in await channel_records(service, slow, held["id"]) if r["kind"] == "channel.outcome"]
    assert [o for o in outcomes if o["at"] <= sent["at"]] == []
    smtp.release.set()
    await every_message_settled(service, slow, 2)


async def test_without_smtp_or_carrier_settings_every_message_is_skipped_as_unavailable(
    service: RunningService, http: aiohttp.ClientSession
) -> None:
    account = await create_account(service.settings, http, service.base_url)
    for channel, to in (("email", "ops@owner.test"), ("text", "+14155550161"), ("voice", "+14155550162")):
        await set_channel(service, account, channel, to, floor="info")
    await raise_alerts(http, service, account, 1, tag=11)
    await every_message_settled(service, account, 3)
    (alert,) = await rate_alerts(http, service, account)
    assert alert["delivered"] == {"webhook": False, "email": False, "text": False, "voice": False}
    records = await channel_records(service, account, alert["id"])
    assert sorted((r["kind"], r["channel"], r["reason"]) for r in records) == [
        ("channel.skipped", "email", "unavailable"),
        ("channel.skipped", "text", "unavailable"),
        ("channel.skipped", "voice", "unavailable"),
    ]


async def test_a_restart_mid_burst_sends_each_alert_once_per_address(
    channels_service: RunningService, smtp: SmtpServer, http: aiohttp.ClientSession
) -> None:
    service = channels_service
    account = await create_account(service.settings, http, service.base_url)
    await set_channel(service, account, "email", "hold@owner.test", "burst@owner.test")
    smtp.release.clear()
    await raise_alerts(http, service, account, 6, tag=7)

    # Two messages held fill the account's two email slots: nothing else is in flight when the role dies.
    async def holding() -> bool:
        ids = {alert["id"] for alert in await rate_alerts(http, service, account)}
        held = [m for m in smtp.to("hold@owner.test") if any(i in plain_text(m) for i in ids)]
        return len(ids) == 6 and len(held) == 2

    await until(holding, 20)
    alerts = await rate_alerts(http, service, account)
    pids = role_pids(service, "alerting")
    assert len(pids) == 1
    os.kill(pids[0], signal.SIGKILL)
    smtp.release.set()

    ids = {alert["id"] for alert in alerts}

    async def attempts() -> list[dict[str, Any]]:
        records = await channel_records(service, account)
        return [r for r in records if r["kind"] == "channel.attempt" and r["alert_id"] in ids]

    # An attempt is appended before its message is sent; the ten sent after the restart each end in an
    # outcome, the two held when the role died never do.
    async def every_one_attempted_and_sent() -> bool:
        records = await channel_records(service, account)
        mine = [r for r in records if r["alert_id"] in ids]
        started = sum(1 for r in mine if r["kind"] == "channel.attempt")
        ended = sum(1 for r in mine if r["kind"] == "channel.outcome")
        return started >= 12 and ended >= 10

    await until(every_one_attempted_and_sent, 60)
    await settled(service.settings)
    for alert in alerts:
        for address in ("hold@owner.test", "burst@owner.test"):
            got = [m for m in smtp.to(address) if alert["id"] in plain_text(m)]
            assert len(got) == 1, (alert["id"], address, len(got))
    attempted = await attempts()
    assert len({(r["alert_id"], r["to"]) for r in attempted}) == len(attempted) == 12


async def test_a_rebuild_sends_nothing_again_on_any_channel(
    channels_service: RunningService, smtp: SmtpServer, carrier: Carrier, http: aiohttp.ClientSession
) -> None:
    service = channels_service
    account = await create_account(service.settings, http, service.base_url)
    await set_channel(service, account, "email", "rebuild@owner.test")
    await set_channel(service, account, "text", "+14155550151", floor="threat")
    await set_channel(service, account, "voice", "+14155550152", floor="threat")
    await raise_alerts(http, service, account, 2, tag=8)
    await every_message_settled(service, account, 6)
    await settled(service.settings)
    before = (len(smtp.received), len(carrier.messages), len(carrier.calls))
    deliveries_before = len(await read_topic(service.settings, service.settings.topic("deliveries")))
    answers_before = await rate_alerts(http, service, account)

    done = await rebuild(service)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    await wait_for_status(http, "GET", f"{service.base_url}/healthz", 200, timeout_s=30)
    await settled(service.settings)
    assert (len(smtp.received), len(carrier.messages), len(carrier.calls)) == before
    assert len(await read_topic(service.settings, service.settings.topic("deliveries"))) == deliveries_before
    assert await rate_alerts(http, service, account) == answers_before
    assert {tuple(sorted(a["delivered"].items())) for a in answers_before} == {
        (("email", True), ("text", True), ("voice", True), ("webhook", False))
    }


async def test_every_channel_record_matches_its_published_schema(channels_service: RunningService) -> None:
    """Runs after the module's other tests, so every channel record kind is on the topics."""
    settings = channels_service.settings
    checker = jsonschema.FormatChecker()
    found: dict[str, set[str]] = {}
    for topic, name in (("deliveries", "deliveries.schema.json"), ("accounts", "accounts.schema.json")):
        validator = jsonschema.Draft202012Validator(schemas.load(name), format_checker=checker)
        for record in await read_topic(settings, settings.topic(topic)):
            value = orjson.loads(record.value)
            if not value["kind"].startswith("channel."):
                continue
            found.setdefault(topic, set()).add(value["kind"])
            errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(value)]
            assert errors == [], (topic, value)
    kinds = {"channel.skipped", "channel.attempt", "channel.outcome"}
    assert found == {"deliveries": kinds, "accounts": {"channel.set"}}
