"""The dashboard in a real browser (docs/dashboard.md): a newcomer's path, keys, tokens, the trusted list,
alert channels, integrations, live calls, sessions, CSRF and account isolation."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import time
import uuid
from pathlib import Path

import aiohttp
import jsonschema
import orjson
import pytest
from playwright.async_api import Browser, Page, expect

import schemas
from callscreen.admin import Admin
from domain.outbound import pause_record
from domain.times import format_ms
from infra.clock import now_ms
from tests.browser.conftest import AXE, PASSWORD, new_person, signed_in, signed_up
from tests.service import RunningService, wait_for_status
from tests.smtp_server import SmtpServer
from tests.topics import read_topic

pytestmark = [pytest.mark.pipeline, pytest.mark.slow]

NUMBER = "+14155552671"


async def post_event(
    http: aiohttp.ClientSession, url: str, body: dict[str, object], key: str = ""
) -> dict[str, object]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with http.post(url, json=body, headers=headers) as r:
        assert r.status == 200, await r.text()
        answer: dict[str, object] = await r.json()
        return answer


def started(call_id: str, caller: str) -> dict[str, object]:
    return {"type": "call.started", "call_id": call_id, "to": NUMBER, "from": caller}


async def test_the_demo_prints_a_key_a_curl_line_and_a_setup_link_that_opens(
    dash: RunningService, browser: Browser, http: aiohttp.ClientSession
) -> None:
    assert dash.process.stdout is not None
    lines = [await asyncio.to_thread(dash.process.stdout.readline) for _ in range(3)]
    assert lines[0].startswith("demo account acct_") and "key: cs_live_" in lines[0]
    assert lines[1].startswith("try: curl -s -X POST ")
    setup_url = lines[2].split("open ", 1)[1].split(" ", 1)[0]
    assert setup_url.startswith(f"{dash.base_url}/dashboard/setup/cs_setup_")
    # The demo's records were appended by its own admin connection; the edge folds them within a second.
    await wait_for_status(http, "GET", setup_url, 200)
    page = await (await browser.new_context()).new_page()
    answer = await page.goto(setup_url)
    assert answer is not None and answer.status == 200
    await expect(page.locator("h1")).to_have_text("Welcome to Callscreen")


async def test_a_newcomer_sets_a_password_signs_out_and_signs_in(
    dash: RunningService, browser: Browser, http: aiohttp.ClientSession
) -> None:
    owner = await new_person(dash, http)
    page = await signed_up(browser, dash, owner)
    await expect(page.locator(".who")).to_contain_text(owner.email)
    await page.click("text=Sign out")
    await expect(page.locator("h1")).to_have_text("Sign in")
    await page.fill("#email", owner.email)
    await page.fill("#password", "not the password at all")
    await page.click("button[type=submit]")
    await expect(page.locator(".problem")).to_have_text("That email and password do not match an account.")
    page = await signed_in(browser, dash.base_url, owner)
    # The setup link is spent once used.
    answer = await page.goto(owner.setup_path)
    assert answer is not None and answer.status == 404


async def test_a_key_made_on_the_page_works_and_revoked_is_refused_within_a_second(
    dash: RunningService, browser: Browser, http: aiohttp.ClientSession
) -> None:
    owner = await new_person(dash, http)
    page = await signed_up(browser, dash, owner)
    await page.goto("/dashboard/keys")
    await page.fill("#label", "ci")
    await page.select_option("#scope", "read")
    await page.click("text=Create key")
    key = (await page.locator("#new-key").inner_text()).strip()
    assert key.startswith("cs_read_")
    headers = {"Authorization": f"Bearer {key}"}
    await wait_for_status(http, "GET", f"{dash.base_url}/v1/account", 200, headers=headers)
    await page.click("button[aria-label='Revoke ci']")
    await expect(page.locator("table")).to_contain_text("revoked")
    await wait_for_status(http, "GET", f"{dash.base_url}/v1/account", 401, timeout_s=1.0, headers=headers)


async def test_rotating_the_ingest_token(dash: RunningService, browser: Browser, http: aiohttp.ClientSession) -> None:
    owner = await new_person(dash, http)
    page = await signed_up(browser, dash, owner)
    await page.goto("/dashboard/live-events")
    await page.click("text=Rotate the ingest token")
    token = (await page.locator("#new-ingest-token").inner_text()).strip()
    assert token.startswith("cs_ing_") and token != owner.account.ingest_token
    answer = await post_event(http, f"{dash.base_url}/v1/events/{token}", started("ing-1", "+12125550111"))
    assert answer["action"] == "allow"
    async with http.post(
        f"{dash.base_url}/v1/events/{owner.account.ingest_token}", json=started("ing-2", "+12125550112")
    ) as r:
        assert r.status == 401


async def test_a_trusted_number_is_allowed_on_its_next_call(
    dash: RunningService, browser: Browser, http: aiohttp.ClientSession
) -> None:
    owner = await new_person(dash, http)
    page = await signed_up(browser, dash, owner)
    url, key = f"{dash.base_url}/v1/events", owner.account.key
    caller = "+12125550123"
    before = await post_event(http, url, started("t-1", caller), key)
    assert "trusted" not in before["reasons"]  # type: ignore[operator]
    await page.goto("/dashboard/trusted")
    await page.fill("#trust", "+1 (212) 555-0123")
    await page.click("text=Trust it")
    await expect(page.locator("ul.plain")).to_contain_text(caller)
    after = await post_event(http, url, started("t-2", caller), key)
    assert (after["action"], after["score"], after["reasons"]) == ("allow", 0.0, ["trusted"])


async def test_a_policy_saved_on_the_page_scores_the_next_call_and_restores(
    dash: RunningService, browser: Browser, http: aiohttp.ClientSession
) -> None:
    owner = await new_person(dash, http)
    page = await signed_up(browser, dash, owner)
    url, key = f"{dash.base_url}/v1/events", owner.account.key
    failed = {"attestation": "failed"}
    before = await post_event(http, url, {**started("p-1", "+12125550131"), "attrs": failed}, key)
    assert (before["score"], before["action"]) == (0.55, "review")
    await page.goto("/dashboard/policy")
    await page.fill("#t-reject", "0.5")
    await page.fill("#w-attestation_failed", "0.6")
    await page.check("input[name='off.forwarded']")
    await page.click("text=Save policy")
    await expect(page.get_by_role("status")).to_contain_text("Saved")
    await expect(page.locator("#t-reject")).to_have_value("0.5")
    async with Admin(dash.settings) as admin:
        shown = await admin.policy_show(owner.account.account_id)
    assert shown["policy"]["thresholds"] == {"review": 0.5, "reject": 0.5}
    assert (shown["policy"]["weights"]["attestation_failed"], shown["policy"]["off"]) == (0.6, ["forwarded"])
    forwarded = {**failed, "forwarded_from": "+12125550100"}
    after = await post_event(http, url, {**started("p-2", "+12125550132"), "attrs": forwarded}, key)
    assert (after["score"], after["action"], after["reasons"]) == (0.6, "reject", ["attestation_failed"])
    assert after["thresholds"] == {"review": 0.5, "reject": 0.5}
    await page.fill("#t-reject", "0.4")
    await page.click("text=Save policy")
    await expect(page.locator("main")).to_contain_text("That policy was refused at policy.thresholds")
    await page.goto("/dashboard/policy")
    await page.click("text=Restore the defaults")
    await expect(page.locator("#t-reject")).to_have_value("0.8")
    restored = await post_event(http, url, {**started("p-3", "+12125550133"), "attrs": failed}, key)
    assert (restored["score"], restored["action"]) == (0.55, "review")
    assert restored["thresholds"] == {"review": 0.5, "reject": 0.8}


async def test_outbound_settings_saved_on_the_page_answer_the_next_outbound_call_and_a_pause_resumes(
    dash: RunningService, browser: Browser, http: aiohttp.ClientSession
) -> None:
    owner = await new_person(dash, http)
    page = await signed_up(browser, dash, owner)
    url, key = f"{dash.base_url}/v1/events", owner.account.key
    account_id = owner.account.account_id

    def dialled(call_id: str, to: str) -> dict[str, object]:
        return {"type": "call.started", "call_id": call_id, "direction": "outbound", "from": NUMBER, "to": to}

    before = await post_event(http, url, dialled("o-1", "+16135550123"), key)
    assert (before["action"], before["reasons"]) == ("reject", ["destination_not_allowed"])
    await page.goto("/dashboard/outbound")
    await page.fill("#o-countries", "US, CA")
    await page.fill("#o-transfer", "+1202555")
    await page.click("text=Save outbound settings")
    await expect(page.get_by_role("status")).to_contain_text("Saved")
    await expect(page.locator("#o-countries")).to_have_value("CA, US")
    after = await post_event(http, url, dialled("o-2", "+16135550123"), key)
    assert (after["action"], after["reasons"]) == ("allow", [])
    await page.fill("#o-countries", "Canada")
    await page.click("text=Save outbound settings")
    await expect(page.locator("main")).to_contain_text("Those outbound settings were refused at countries")
    alert = "alrt_" + "b" * 20
    async with Admin(dash.settings) as admin:
        await admin.append(pause_record(account_id, alert, "number.spend_exceeded", NUMBER, format_ms(now_ms())))
    await wait_for_paused(http, dash.base_url, key)
    await page.goto("/dashboard/outbound")
    await expect(page.locator("main")).to_contain_text("Outbound calls are paused")
    await page.click("text=Resume outbound calls")
    await expect(page.get_by_role("status")).to_contain_text("Resumed")
    resumed = await post_event(http, url, dialled("o-resumed", "+12025550143"), key)
    assert (resumed["action"], resumed["reasons"]) == ("allow", [])
    async with Admin(dash.settings) as admin:
        shown = await admin.outbound_show(account_id)
    assert shown["outbound"] == {
        "countries": ["CA", "US"],
        "transfer": ["+1202555"],
        "pause_on": "critical",
        "paused": None,
    }


async def wait_for_paused(http: aiohttp.ClientSession, base_url: str, key: str, timeout_s: float = 5.0) -> None:
    """Once the edge answers outbound starts paused (the pause record folds within a second); asked with
    `GET /v1/score`, which records nothing."""
    deadline = time.monotonic() + timeout_s
    query = "to=%2B12025550143&from=%2B14155552671&direction=outbound"
    while True:
        async with http.get(f"{base_url}/v1/score?{query}", headers={"Authorization": f"Bearer {key}"}) as r:
            if (await r.json())["reasons"] == ["outbound_paused"]:
                return
        assert time.monotonic() < deadline, "the pause never reached the edge"
        await asyncio.sleep(0.05)


async def test_a_call_labelled_on_its_page_counts_on_the_accuracy_page(
    dash: RunningService, browser: Browser, http: aiohttp.ClientSession
) -> None:
    owner = await new_person(dash, http)
    page = await signed_up(browser, dash, owner)
    url, key = f"{dash.base_url}/v1/events", owner.account.key
    failed = {"attestation": "failed"}
    answer = await post_event(http, url, {**started("acc-1", "+12125550141"), "attrs": failed}, key)
    assert answer["action"] == "review"
    await page.goto("/dashboard/accuracy")
    await expect(page.locator("#labelled")).to_have_text("0 labelled calls.")
    await page.goto("/dashboard/calls/acc-1")
    await page.click("button[value='spam']")
    await expect(page.locator("button[value='spam']")).to_have_attribute("aria-pressed", "true")
    await page.goto("/dashboard/accuracy")
    await expect(page.locator("#labelled")).to_have_text("1 labelled call.")
    review = page.locator("#matrix tbody tr").nth(1)
    await expect(review.locator("th")).to_have_text("review")
    await expect(review.locator("td")).to_have_text(["1", "0"])
    await expect(page.locator("#rate-recall")).to_have_text("0.0%")
    await expect(page.locator("#rate-precision")).to_have_text("—")
    await expect(page.locator("#by-reason tbody th")).to_have_text(["attestation_failed"])
    await expect(page.locator("#by-reason tbody td")).to_have_text(["1", "0"])
    await page.goto("/dashboard/accuracy?since=2020-01-01&until=2020-01-31")
    await expect(page.locator("#labelled")).to_have_text("0 labelled calls.")
    await page.goto("/dashboard/accuracy?since=someday")
    await expect(page.locator("main")).to_contain_text("Give dates as YYYY-MM-DD.")


async def test_a_shadow_run_shows_its_progress_and_result_and_its_policy_applies(
    dash: RunningService, browser: Browser, http: aiohttp.ClientSession
) -> None:
    owner = await new_person(dash, http)
    page = await signed_up(browser, dash, owner)
    url, key = f"{dash.base_url}/v1/events", owner.account.key
    failed = {"attestation": "failed"}
    # 0.6625 (a failed attestation from a neighbour's prefix): review live, reject under 0.6.
    flips = await post_event(http, url, {**started("sh-1", "+14155550141"), "attrs": failed}, key)
    stays = await post_event(http, url, {**started("sh-2", "+12125550142"), "attrs": failed}, key)
    assert (flips["action"], stays["action"]) == ("review", "review")
    # Labelled on its page first: the result shows the label in the cell the call flipped to.
    await page.goto("/dashboard/calls/sh-1")
    await page.click("button[value='spam']")
    await expect(page.locator("button[value='spam']")).to_have_attribute("aria-pressed", "true")
    await page.goto("/dashboard/shadow")
    await expect(page.locator("#shadow-run")).to_contain_text("No shadow run yet.")
    # Prefilled from the account's policy, here the defaults, and a window of the last week to the next hour.
    await expect(page.locator("#t-reject")).to_have_value("0.8")
    await page.fill("#t-reject", "0.6")
    await page.click("text=Run shadow")
    await expect(page.locator("#shadow-run h2")).to_contain_text("Run shd_")
    # The fragment refreshes every 2 s while it runs, until the run is done.
    await expect(page.locator("#shadow-run")).to_contain_text("Done", timeout=60_000)
    await expect(page.locator("#shadow-progress")).to_have_attribute("value", "1.0")
    await expect(page.locator("table.matrix tbody tr", has_text="review")).to_contain_text("1 (1 spam, 0 good)")
    flipped = page.locator("#shadow-run tbody tr", has_text="sh-1")
    await expect(flipped).to_contain_text("reject")
    await expect(page.locator("#shadow-run")).not_to_contain_text("sh-2")
    await expect(page.locator("#shadow-run svg rect.rejects")).to_have_count(1)
    # The finished run's page passes axe-core too (the empty page is in PAGES); axe is injected past the CSP.
    checked = await browser.new_context(base_url=dash.base_url, bypass_csp=True)
    await checked.add_cookies(await page.context.cookies())  # type: ignore[arg-type]
    axe_page = await checked.new_page()
    await axe_page.goto(page.url)
    await axe_page.add_script_tag(path=str(AXE))
    found = await axe_page.evaluate(
        "async () => (await axe.run()).violations"
        ".filter(v => ['serious', 'critical'].includes(v.impact)).map(v => v.id + ': ' + v.help)"
    )
    assert found == []
    await checked.close()
    await flipped.locator("a").click()
    await expect(page).to_have_url(f"{dash.base_url}/dashboard/calls/sh-1")
    await page.go_back()
    await page.click("text=Apply this policy")
    await expect(page.get_by_role("status")).to_contain_text("Saved")
    await expect(page.locator("#t-reject")).to_have_value("0.6")
    after = await post_event(http, url, {**started("sh-3", "+14155550143"), "attrs": failed}, key)
    assert (after["score"], after["action"]) == (flips["score"], "reject")


async def test_an_email_channel_gets_the_test_alert(
    dash: RunningService, browser: Browser, http: aiohttp.ClientSession, smtp: SmtpServer
) -> None:
    owner = await new_person(dash, http, plan="watch")
    page = await signed_up(browser, dash, owner)
    await page.goto("/dashboard/channels")
    await expect(page.locator("section", has_text="Text messages")).to_contain_text("Needs the Guard plan.")
    address = f"me-{uuid.uuid4().hex[:6]}@owner.test"
    await page.fill("#to-email", address)
    await page.click("text=Save email")
    await expect(page.locator("#to-email")).to_have_value(address)
    await page.click("text=Send a test alert")
    await expect(page.locator("[role=status]")).to_contain_text("A test alert is on its way")
    for _ in range(100):
        if smtp.to(address):
            break
        await page.wait_for_timeout(100)
    (message,) = smtp.to(address)
    assert message["Subject"] == "[Callscreen] critical: alert.test"
    await page.goto("/dashboard/alerts")
    row = page.locator("tbody tr").first
    await expect(row).to_contain_text("alert.test")
    # The page is drawn from the worker's view, which learns the email's outcome from the deliveries topic
    # after the mail itself has gone: a page drawn in between says "missed" until it is drawn again.
    for _ in range(50):
        if "email: delivered" in await row.inner_text():
            break
        await page.wait_for_timeout(100)
        await page.reload()
    await expect(row).to_contain_text("email: delivered")


def vapi_signed(secret: str, body: bytes) -> dict[str, str]:
    """Vapi's HMAC credential headers: hex HMAC-SHA256 of `<x-timestamp>.<body>`, the timestamp in ms."""
    stamp = str(int(time.time() * 1000))
    signature = hmac.new(secret.encode(), stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return {"Content-Type": "application/json", "x-timestamp": stamp, "x-signature": signature}


async def test_an_integration_secret_is_saved_sealed_never_shown_and_removed(
    dash: RunningService, browser: Browser, http: aiohttp.ClientSession
) -> None:
    owner = await new_person(dash, http)
    page = await signed_up(browser, dash, owner)
    await page.click("nav >> text=Integrations")
    await expect(page.locator("h1")).to_have_text("Integrations")
    await expect(page.locator("#state-vapi")).to_contain_text("not configured")
    secret = f"vapi-credential-{uuid.uuid4().hex}"
    await page.fill("#secret-vapi", secret)
    await page.click("text=Save the Vapi secret")
    await expect(page.locator("[role=status]")).to_contain_text("Vapi: configured")
    await expect(page.locator("#state-vapi")).to_have_text("configured")
    await expect(page.locator("#state-retell")).to_contain_text("not configured")
    # The URL to paste, with the token's place marked: only the token's digest is kept.
    await expect(page.locator("#url-vapi")).to_have_text(f"{dash.base_url}/v1/ingest/vapi/<ingest token>")
    await expect(page.locator("#secret-vapi")).to_have_value("")
    assert secret not in await page.content()
    await expect(page.locator("#last-vapi")).to_contain_text("None on this server")

    # That URL with the account's ingest token takes Vapi's signed posts; the card shows the latest one.
    url = f"{dash.base_url}/v1/ingest/vapi/{owner.account.ingest_token}"
    body = orjson.dumps({"message": {"type": "status-update", "status": "ringing"}})
    async with http.post(url, data=body, headers=vapi_signed("not the secret", body)) as r:
        assert r.status == 401, await r.text()
    await page.reload()
    await expect(page.locator("#last-vapi")).to_contain_text("401 invalid_signature")
    async with http.post(url, data=body, headers=vapi_signed(secret, body)) as r:
        assert r.status == 200, await r.text()
        assert (await r.json())["ignored"] is True
    await page.reload()
    await expect(page.locator("#last-vapi")).to_contain_text("200 ignored")
    assert secret not in await page.content()

    # Sealed on the accounts topic, and in no log line.
    records = [orjson.loads(r.value) for r in await read_topic(dash.settings, dash.settings.topic("accounts"))]
    mine = [r for r in records if r["kind"] == "integration.set" and r["account_id"] == owner.account.account_id]
    assert [r["platform"] for r in mine] == ["vapi"]
    assert mine[0]["integration_secret"].startswith("fernet:")
    assert secret not in orjson.dumps(records).decode()
    assert secret not in (dash.data_dir.parent / f"{dash.data_dir.name}.log").read_text()

    await page.click("text=Remove Vapi")
    await expect(page.locator("[role=status]")).to_contain_text("Vapi: removed")
    await expect(page.locator("#state-vapi")).to_contain_text("not configured")
    assert await page.locator("text=Remove Vapi").count() == 0
    async with http.post(url, data=body, headers=vapi_signed(secret, body)) as r:
        assert r.status == 409, await r.text()


async def test_livekit_needs_its_api_key_with_the_secret(
    dash: RunningService, browser: Browser, http: aiohttp.ClientSession
) -> None:
    owner = await new_person(dash, http)
    page = await signed_up(browser, dash, owner)
    await page.goto("/dashboard/integrations")
    token = await page.locator("form[action='/dashboard/signout'] input[name=csrf]").get_attribute("value")
    secret = "lk-secret-" + uuid.uuid4().hex
    form: dict[str, str | float | bool] = {"csrf": token or "", "platform": "livekit", "secret": secret}
    answer = await page.request.post("/dashboard/integrations/set", form=form)
    assert answer.status == 400
    assert "API key and its secret" in await answer.text()
    await page.fill("#key-livekit", "APIbrowsertest")
    await page.fill("#secret-livekit", secret)
    await page.click("text=Save the LiveKit secret")
    await expect(page.locator("#state-livekit")).to_contain_text("configured")
    await expect(page.locator("#state-livekit")).to_contain_text("API key APIbrowsertest")
    assert secret not in await page.content()


async def test_live_calls_show_a_flag_while_turns_stream(
    dash: RunningService, browser: Browser, http: aiohttp.ClientSession
) -> None:
    owner = await new_person(dash, http)
    page = await signed_up(browser, dash, owner)
    await page.goto("/dashboard/calls/live")
    await expect(page.locator("#live-rows")).to_contain_text("No call is in progress.")
    url, key = f"{dash.base_url}/v1/events", owner.account.key
    await post_event(http, url, started("live-1", "+12125550177"), key)
    await expect(page.locator("#live-rows")).to_contain_text("+12125550177")
    for _ in range(7):
        await post_event(http, url, {"type": "interruption", "call_id": "live-1", "role": "user"}, key)
    await expect(page.locator("#live-rows .flag")).to_contain_text("barge_storm")


async def test_sign_out_everywhere_ends_the_session_on_another_edge_within_a_second(
    dash: RunningService, second_edge: RunningService, browser: Browser, http: aiohttp.ClientSession
) -> None:
    owner = await new_person(dash, http)
    here = await signed_up(browser, dash, owner)
    there = await signed_in(browser, second_edge.base_url, owner)
    await here.goto("/dashboard/channels")
    await here.click("text=Sign out everywhere")
    await expect(here.locator("h1")).to_have_text("Sign in")
    signed_out_at = time.monotonic()
    while True:
        await there.goto("/dashboard/plan")
        if await there.locator("h1").inner_text() == "Sign in":
            break
        assert time.monotonic() - signed_out_at < 1.0, "still signed in on the other edge after a second"


async def test_a_post_without_the_csrf_token_is_refused(
    dash: RunningService, browser: Browser, http: aiohttp.ClientSession
) -> None:
    owner = await new_person(dash, http)
    page = await signed_up(browser, dash, owner)
    answer = await page.request.post("/dashboard/trusted/add", form={"number": "+12125550199"})
    assert answer.status == 403
    forged = await page.request.post("/dashboard/trusted/add", form={"number": "+12125550199", "csrf": "x" * 40})
    assert forged.status == 403
    await page.goto("/dashboard/trusted")
    await expect(page.locator("ul.plain")).to_contain_text("No trusted numbers.")


async def test_another_accounts_call_is_not_found(
    dash: RunningService, browser: Browser, http: aiohttp.ClientSession
) -> None:
    owner, other = await new_person(dash, http), await new_person(dash, http)
    await post_event(http, f"{dash.base_url}/v1/events", started("theirs-1", "+12125550155"), other.account.key)
    page = await signed_up(browser, dash, owner)
    answer = await page.goto("/dashboard/calls/theirs-1")
    assert answer is not None and answer.status == 404
    mine = await signed_up(browser, dash, other)
    answer = await mine.goto("/dashboard/calls/theirs-1")
    assert answer is not None and answer.status == 200
    await expect(mine.locator("dl.facts")).to_contain_text("+12125550155")


async def test_a_read_only_teammate_sees_everything_and_changes_nothing(
    dash: RunningService, browser: Browser, http: aiohttp.ClientSession
) -> None:
    owner = await new_person(dash, http)
    viewer = await new_person(dash, http, role="viewer", account=owner.account)
    page = await signed_up(browser, dash, viewer)
    await expect(page.locator(".who")).to_contain_text("(read-only)")
    await page.goto("/dashboard/keys")
    await expect(page.locator("table")).to_contain_text(owner.account.key_id)
    assert await page.locator("text=Create key").count() == 0
    await page.goto("/dashboard/integrations")
    await expect(page.locator("#url-vapi")).to_contain_text("/v1/ingest/vapi/")
    assert await page.locator("#secret-vapi").count() == 0
    csrf = await page.evaluate("() => document.cookie")  # HttpOnly: the session is not readable here
    assert "cs_session" not in csrf
    token = await page.locator("form[action='/dashboard/signout'] input[name=csrf]").get_attribute("value")
    answer = await page.request.post("/dashboard/keys", form={"csrf": token or "", "scope": "full", "label": "x"})
    assert answer.status == 403
    assert "Your role can see this account but not change it." in await answer.text()


async def test_sign_in_is_limited_to_10_tries_in_10_minutes(
    dash: RunningService, second_edge: RunningService, http: aiohttp.ClientSession
) -> None:
    """On an edge no other test signs in to with a wrong password, so the address's count is this test's."""
    owner = await new_person(dash, http)
    base = second_edge.base_url
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as browserless:
        async with browserless.get(f"{base}/dashboard/signin") as r:
            page = await r.text()
        csrf = page.split('name="csrf" value="')[1].split('"')[0]
        statuses = []
        for _ in range(11):
            form = {"csrf": csrf, "email": owner.email, "password": "wrong password, again"}
            async with browserless.post(f"{base}/dashboard/signin", data=form) as r:
                statuses.append(r.status)
                retry = r.headers.get("Retry-After")
    assert statuses == [401] * 10 + [429]
    assert retry is not None and int(retry) > 0


async def test_security_headers_and_no_secret_in_a_log_line(
    dash: RunningService, browser: Browser, http: aiohttp.ClientSession
) -> None:
    async with http.get(f"{dash.base_url}/dashboard/signin") as r:
        policy = r.headers["Content-Security-Policy"]
        assert r.headers["X-Frame-Options"] == "DENY"
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy and "frame-ancestors 'none'" in policy
    owner = await new_person(dash, http)
    page = await signed_up(browser, dash, owner)
    await page.goto("/dashboard/keys")
    await page.click("text=Create key")
    key = (await page.locator("#new-key").inner_text()).strip()
    log = (dash.data_dir.parent / f"{dash.data_dir.name}.log").read_text()
    for secret in (PASSWORD, key, owner.setup_path.rsplit("/", 1)[1]):
        assert secret not in log


PAGES = [
    "",
    "/calls",
    "/calls/live",
    "/alerts",
    "/keys",
    "/live-events",
    "/integrations",
    "/channels",
    "/trusted",
    "/accuracy",
    "/policy",
    "/outbound",
    "/shadow",
    "/plan",
]
WIDTHS = {"desktop": (1280, 860), "phone": (390, 844)}


async def test_every_page_reads_on_a_phone_and_passes_axe(
    dash: RunningService, browser: Browser, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """Each page at desktop and phone widths (the signed-in pages, one call's and one alert's, sign-in and
    setup): no sideways scrolling, no serious or critical axe-core violation, and a screenshot (into
    docs/dashboard with CALLSCREEN_SCREENSHOTS=docs/dashboard)."""
    owner = await new_person(dash, http)
    url, key = f"{dash.base_url}/v1/events", owner.account.key
    for i, caller in enumerate(("+12125550101", "+13105550102", "+16175550103")):
        await post_event(http, url, started(f"shot-{i}", caller), key)
    # A sixth call from one caller within ten minutes raises caller.rate_exceeded: an alert to show.
    for i in range(3, 9):
        await post_event(http, url, started(f"shot-{i}", "+12125550199"), key)
    alert_id = await first_alert(http, dash.base_url, key)
    signed_in_pages = {(path.strip("/").replace("/", "-") or "overview"): path for path in PAGES}
    signed_in_pages |= {"call": "/calls/shot-0", "alert": f"/alerts/{alert_id}"}
    newcomer = await new_person(dash, http)
    public_pages = {"signin": "/dashboard/signin", "setup": newcomer.setup_path}
    shots = Path(os.environ.get("CALLSCREEN_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    signed: Page = await signed_up(browser, dash, owner)
    cookies = await signed.context.cookies()
    for width_name, (width, height) in WIDTHS.items():
        for pages, signed_in_context in ((signed_in_pages, True), (public_pages, False)):
            context = await browser.new_context(
                base_url=dash.base_url, viewport={"width": width, "height": height}, bypass_csp=True
            )
            if signed_in_context:
                await context.add_cookies(cookies)  # type: ignore[arg-type]
            page = await context.new_page()
            for name, path in pages.items():
                target = f"/dashboard{path}" if signed_in_context else path
                answer = await page.goto(target)
                assert answer is not None and answer.status == 200, path
                sideways = await page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
                assert sideways <= 0, (path, width_name, sideways)
                await page.screenshot(path=str(shots / f"{name}-{width_name}.png"), full_page=True)
                await page.add_script_tag(path=str(AXE))
                found = await page.evaluate(
                    "async () => (await axe.run()).violations"
                    ".filter(v => ['serious', 'critical'].includes(v.impact)).map(v => v.id + ': ' + v.help)"
                )
                assert found == [], (path, width_name, found)
            await context.close()


async def first_alert(http: aiohttp.ClientSession, base_url: str, key: str, timeout_s: float = 10.0) -> str:
    """The id of the account's newest alert, once the detectors have raised one."""
    deadline = time.monotonic() + timeout_s
    while True:
        async with http.get(f"{base_url}/v1/alerts", headers={"Authorization": f"Bearer {key}"}) as r:
            assert r.status == 200, await r.text()
            alerts = (await r.json())["data"]
        if alerts:
            return str(alerts[0]["id"])
        assert time.monotonic() < deadline, "no alert was raised"
        await asyncio.sleep(0.1)


async def test_every_record_the_dashboard_appends_matches_the_accounts_schema(dash: RunningService) -> None:
    """Runs after the module's other tests, so people, sessions and the dashboard's changes are on the topic."""
    validator = jsonschema.Draft202012Validator(
        schemas.load("accounts.schema.json"), format_checker=jsonschema.FormatChecker()
    )
    kinds = set()
    for record in await read_topic(dash.settings, dash.settings.topic("accounts")):
        value = orjson.loads(record.value)
        kinds.add(value["kind"])
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(value)]
        assert errors == [], value
    dashboard_kinds = {"person.invited", "person.password_set", "session.started", "session.ended", "sessions.ended"}
    changes = {"key.created", "key.revoked", "token.rotated", "trusted.added", "channel.set", "alert.test_requested"}
    changes |= {"integration.set", "integration.removed", "policy.set", "outbound.set", "outbound.resumed"}
    assert dashboard_kinds | changes <= kinds
