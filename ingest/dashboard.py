"""The dashboard's frame (docs/dashboard.md): templates, static files, security headers, HTML error
pages, the signed-in person of each request, and the one way its changes reach the accounts topic.

Pages live in ingest.dashboard_pages and sign-in in ingest.dashboard_auth; both use only this module's
helpers, so every page gets the same checks.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp_jinja2
import jinja2
from aiohttp import web

from domain import commands
from domain.accounts import Account, stamp
from domain.people import Person
from infra.clock import now_ms
from infra.sealing import Sealer, sealed, sealer_for
from infra.settings import Settings
from ingest.errors import ApiError
from ingest.service import Edge, edge_of
from ingest.sessions import SESSION_COOKIE, Hashing, IdleClock, SignedIn, SignInLimits, csrf_ok, trusted_networks

log = logging.getLogger("callscreen.dashboard")
HERE = Path(__file__).parent
PREFIX = "/dashboard"
SECURITY_HEADERS = {
    # No inline script or style anywhere: everything comes from /dashboard/static.
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Dashboard:
    """What the dashboard keeps on this edge: sign-in limits, the password hashing threads, the proxies
    trusted to name the client, refused tries' pages, idle times, and the deployment key."""

    def __init__(self, settings: Settings) -> None:
        self.limits = SignInLimits(settings)
        self.hashing = Hashing(settings.sign_in_verify_slots)
        self.trusted = trusted_networks(settings.trusted_proxies)
        # The sign-in page a refused try gets, by its sentence (ingest.dashboard_auth.too_many).
        self.refusal_pages: dict[str, str] = {}
        self.idle = IdleClock(settings.session_idle_ms)
        self._sealer: Sealer | None = None

    def sealer(self, edge: Edge) -> Sealer:
        if self._sealer is None:
            self._sealer = sealer_for(edge.settings)
        return self._sealer


DASHBOARD: web.AppKey[Dashboard] = web.AppKey("dashboard", Dashboard)


class PageError(Exception):
    """A page that cannot be shown, with the status and a sentence for the person."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def is_dashboard(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


@web.middleware
async def dashboard_frame(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Security headers on every dashboard answer; its errors as HTML pages, never the API's JSON."""
    if not is_dashboard(request.path):
        return await handler(request)
    try:
        response = await handler(request)
    except web.HTTPRedirection as redirect:
        response = plain_redirect(redirect)
    except PageError as exc:
        response = error_page(request, exc.status, exc.message)
    except ApiError as exc:
        response = error_page(request, exc.status, api_error_message(exc))
    except web.HTTPNotFound:
        response = error_page(request, 404, "There is no such page.")
    except web.HTTPMethodNotAllowed:
        response = error_page(request, 405, "That page does not take this kind of request.")
    except Exception:
        # The route's pattern, never the path: a setup link's path holds its token.
        resource = request.match_info.route.resource
        log.exception("dashboard page failed", extra={"route": resource.canonical if resource else "unmatched"})
        response = error_page(request, 500, "Something went wrong on our side. Try again in a moment.")
    for name, value in SECURITY_HEADERS.items():
        response.headers[name] = value
    return response


def plain_redirect(redirect: web.HTTPRedirection) -> web.Response:
    """The redirect a page raised, as a response: aiohttp deprecates answering with the exception itself."""
    response = web.Response(status=redirect.status, headers={"Location": redirect.headers["Location"]})
    for name, morsel in redirect.cookies.items():
        response.cookies[name] = morsel
    return response


def api_error_message(exc: ApiError) -> str:
    if exc.status == 503:
        return "The service is busy or starting. Try again in a moment."
    if exc.status == 429:
        return "Too many requests. Wait a little and try again."
    return f"That did not work ({exc.code})."


def error_page(request: web.Request, status: int, message: str) -> web.Response:
    return aiohttp_jinja2.render_template(
        "error.html", request, {"status": status, "message": message, "me": None}, status=status
    )


def signed_in(request: web.Request) -> SignedIn:
    """The person behind the session cookie; anyone else is sent to sign in."""
    edge = edge_of(request)
    token = request.cookies.get(SESSION_COOKIE, "")
    found = edge.accounts.people.session(token) if token else None
    if found is None or found[1].account_id not in edge.accounts.accounts:
        raise web.HTTPSeeOther(f"{PREFIX}/signin")
    session, person = found
    if not request.app[DASHBOARD].idle.alive(token, session, now_ms()):
        raise web.HTTPSeeOther(f"{PREFIX}/signin")
    return SignedIn(token, session, person)


def account_of(me: SignedIn, request: web.Request) -> Account:
    return edge_of(request).accounts.accounts[me.person.account_id]


async def form_of(request: web.Request, me: SignedIn, change: bool = True) -> dict[str, str]:
    """A POSTed form, after its CSRF token; `change` forms need an owner (a viewer changes nothing)."""
    posted = await request.post()
    if not csrf_ok(me.token, posted.get("csrf")):
        raise PageError(403, "This form has expired. Go back, reload the page and try again.")
    if change and not me.person.can_change:
        raise PageError(403, "Your role can see this account but not change it.")
    return {name: value for name, value in posted.items() if isinstance(value, str)}


async def append_change(request: web.Request, change: commands.Change) -> dict[str, Any]:
    """The same record the `callscreen` admin commands append, sealed the same way."""
    edge = edge_of(request)
    await append_record(edge, sealed(change.record, lambda: request.app[DASHBOARD].sealer(edge)))
    return change.shown


async def append_record(edge: Edge, record: dict[str, Any]) -> None:
    record = stamp(record, now_ms())
    await edge.append(edge.settings.topic("accounts"), record["account_id"], record)
    edge.fold_account(record)


def page(request: web.Request, template: str, me: SignedIn | None, **context: Any) -> web.Response:
    account = account_of(me, request) if me is not None else None
    person: Person | None = me.person if me is not None else None
    values = {"me": me, "person": person, "account": account, "path": request.path, **context}
    return aiohttp_jinja2.render_template(template, request, values)


def setup(app: web.Application, settings: Settings) -> None:
    """Templates, static files and the frame middleware for every /dashboard path."""
    env = aiohttp_jinja2.setup(
        app,
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["prefix"] = PREFIX
    app[DASHBOARD] = Dashboard(settings)

    async def close_hashing(app: web.Application) -> None:
        app[DASHBOARD].hashing.close()

    app.on_cleanup.append(close_hashing)
    app.middlewares.append(dashboard_frame)
    app.router.add_static(f"{PREFIX}/static", HERE / "static", append_version=False)
