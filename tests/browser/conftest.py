"""A real browser (Debian's Chromium, driven by Playwright) against a real service with a real SMTP server
on loopback, and the people who sign in to it."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import pytest
from playwright.async_api import Browser, BrowserContext, Page, async_playwright, expect

from callscreen.admin import Admin
from tests.service import AccountKeys, RunningService, running_service, wait_for_status
from tests.smtp_server import SmtpServer, smtp_server

PASSWORD = "correct horse battery staple"
ROOT = Path(__file__).resolve().parent.parent.parent
AXE = ROOT / "deploy" / "browser" / "node_modules" / "axe-core" / "axe.min.js"


@pytest.fixture(scope="module")
async def smtp() -> AsyncIterator[SmtpServer]:
    async with smtp_server() as server:
        yield server


@pytest.fixture(scope="module")
def dash(kafka: str, tmp_path_factory: pytest.TempPathFactory, smtp: SmtpServer) -> Iterator[RunningService]:
    env = {"CALLSCREEN_SMTP_URL": smtp.url, "CALLSCREEN_EMAIL_FROM": "alerts@callscreen.test"}
    with running_service(tmp_path_factory.mktemp("dashboard") / "data", kafka, "--demo", env=env) as running:
        yield running


@pytest.fixture(scope="module")
def second_edge(dash: RunningService, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    """Another edge of the same deployment: sessions, sign-outs and limits as another edge sees them."""
    with running_service(
        tmp_path_factory.mktemp("edge") / "data", dash.settings.broker, "--role", "edge", env=dash.env
    ) as running:
        yield running


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Browser]:
    chromium = shutil.which("chromium")
    assert chromium is not None, "the browser tests need Debian's chromium (make test installs it)"
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        yield launched
        await launched.close()


@dataclass
class Owner:
    """A person of an account, with the account's original API key."""

    account: AccountKeys
    email: str
    setup_path: str


async def new_person(
    service: RunningService,
    http: aiohttp.ClientSession,
    plan: str = "guard",
    role: str = "owner",
    account: AccountKeys | None = None,
) -> Owner:
    """A person invited (to a new account unless `account` is given), once the edge has their link."""
    email = f"{role}-{uuid.uuid4().hex[:8]}@owner.test"
    async with Admin(service.settings) as admin:
        if account is None:
            created = await admin.account_create(plan, "browser", email=email)
            account = AccountKeys(
                **{k: created[k] for k in ("account_id", "key", "key_id", "ingest_token", "signing_secret", "plan")}
            )
        else:
            created = await admin.user_invite(account.account_id, email, role)
    setup_path = urlsplit(created["setup_url"]).path
    await wait_for_status(http, "GET", service.base_url + setup_path, 200, timeout_s=2.0)
    return Owner(account, email, setup_path)


async def signed_up(browser: Browser, service: RunningService, person: Owner, base_url: str = "") -> Page:
    """A fresh browser context where `person` set their password from the setup link."""
    context: BrowserContext = await browser.new_context(base_url=base_url or service.base_url)
    page = await context.new_page()
    await page.goto(person.setup_path)
    await page.fill("#password", PASSWORD)
    await page.fill("#again", PASSWORD)
    await page.click("button[type=submit]")
    await expect(page.locator("h1")).to_have_text("Overview")
    return page


async def signed_in(browser: Browser, base_url: str, person: Owner) -> Page:
    context = await browser.new_context(base_url=base_url)
    page = await context.new_page()
    await page.goto("/dashboard/signin")
    await page.fill("#email", person.email)
    await page.fill("#password", PASSWORD)
    await page.click("button[type=submit]")
    await expect(page.locator("h1")).to_have_text("Overview")
    return page
