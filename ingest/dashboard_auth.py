"""Setting a password from a setup link, signing in and out (docs/dashboard.md, People and sessions).

A failed sign-in never says which part was wrong; tries are limited per email and per address, and
each costs an argon2id verify only when one of the edge's few verify slots is free (ingest.sessions.Hashing);
a refused try is answered before its form is read when it can be.
"""

from __future__ import annotations

import math
import secrets

from aiohttp import web

from domain import ids
from domain.people import new_session_token, normal_email
from infra.clock import now_ms
from ingest.dashboard import DASHBOARD, PREFIX, PageError, append_record, form_of, page, signed_in
from ingest.service import Edge, edge_of
from ingest.sessions import (
    FORM_COOKIE,
    clear_session_cookie,
    client_address,
    csrf_for,
    csrf_ok,
    password_problem,
    set_session_cookie,
)

WRONG = "That email and password do not match an account."
BUSY = "Too many sign-ins at once. Try again in a moment."


def secure(edge: Edge) -> bool:
    return edge.settings.public_url.startswith("https://")


def form_token(request: web.Request) -> str:
    """The pre-sign-in form cookie's value, made on first sight."""
    return request.cookies.get(FORM_COOKIE) or secrets.token_urlsafe(24)


def with_form_cookie(response: web.Response, token: str, edge: Edge) -> web.Response:
    response.set_cookie(FORM_COOKIE, token, httponly=True, samesite="Strict", secure=secure(edge), path=PREFIX)
    return response


async def checked_form(request: web.Request) -> dict[str, str]:
    posted = await request.post()
    if not csrf_ok(request.cookies.get(FORM_COOKIE), posted.get("csrf")):
        raise PageError(403, "This form has expired. Go back, reload the page and try again.")
    return {name: value for name, value in posted.items() if isinstance(value, str)}


async def start_session(request: web.Request, person_id: str, account_id: str) -> web.Response:
    edge = edge_of(request)
    token = new_session_token()
    record = {
        "kind": "session.started",
        "account_id": account_id,
        "person_id": person_id,
        "session_digest": ids.digest(token),
    }
    await append_record(edge, record)
    response = web.HTTPSeeOther(PREFIX)
    set_session_cookie(response, token, secure(edge))
    raise response


async def setup_page(request: web.Request) -> web.Response:
    edge = edge_of(request)
    person = edge.accounts.people.person_by_setup(request.match_info["token"], now_ms())
    if person is None:
        raise PageError(404, "This setup link is not valid any more. Ask the account's owner for a new one.")
    token = form_token(request)
    response = page(request, "setup.html", None, email=person.email, csrf=csrf_for(token), problem=None)
    return with_form_cookie(response, token, edge)


async def setup_submit(request: web.Request) -> web.Response:
    edge = edge_of(request)
    form = await checked_form(request)
    person = edge.accounts.people.person_by_setup(request.match_info["token"], now_ms())
    if person is None:
        raise PageError(404, "This setup link is not valid any more. Ask the account's owner for a new one.")
    password = form.get("password", "")
    problem = password_problem(password)
    if problem is None and password != form.get("again", ""):
        problem = "The two passwords differ."
    if problem is not None:
        token = form_token(request)
        answer = page(request, "setup.html", None, email=person.email, csrf=csrf_for(token), problem=problem)
        answer.set_status(400)
        return with_form_cookie(answer, token, edge)
    record = {
        "kind": "person.password_set",
        "account_id": person.account_id,
        "person_id": person.person_id,
        "password_hash": await request.app[DASHBOARD].hashing.hash(password),
    }
    await append_record(edge, record)
    return await start_session(request, person.person_id, person.account_id)


async def signin_page(request: web.Request) -> web.Response:
    token = form_token(request)
    response = page(request, "signin.html", None, csrf=csrf_for(token), problem=None, email="")
    return with_form_cookie(response, token, edge_of(request))


# A refused try's page is rendered once per sentence, with this where its form's token goes.
_TOKEN_SLOT = f"csrf{secrets.token_hex(12)}"
REFUSAL_PAGES_MAX = 64


def too_many(request: web.Request, token: str, problem: str, retry_s: int) -> web.Response:
    """The sign-in page again, 429 with `Retry-After`: what every refused try gets.

    Its sentence says why; the email is not repeated. Each sentence's page is rendered once and the form's
    token put in after, so a refused try costs the edge about what any refused request does.
    """
    dashboard = request.app[DASHBOARD]
    text = dashboard.refusal_pages.get(problem)
    if text is None:
        text = page(request, "signin.html", None, csrf=_TOKEN_SLOT, problem=problem, email="").text or ""
        if len(dashboard.refusal_pages) < REFUSAL_PAGES_MAX:
            dashboard.refusal_pages[problem] = text
    answer = web.Response(text=text.replace(_TOKEN_SLOT, csrf_for(token)), status=429, content_type="text/html")
    answer.headers["Retry-After"] = str(retry_s)
    if request.cookies.get(FORM_COOKIE) == token:
        return answer  # the form's cookie came with the try: nothing to set
    return with_form_cookie(answer, token, edge_of(request))


def limited(wait_s: float) -> str:
    return f"Too many tries. Wait {int(wait_s // 60) + 1} minutes and try again."


async def signin_submit(request: web.Request) -> web.Response:
    edge = edge_of(request)
    dashboard = request.app[DASHBOARD]
    address = client_address(request.remote, request.headers.getall("X-Forwarded-For", ()), dashboard.trusted)
    token = form_token(request)
    # A try that could not be checked anyway is refused before its form is read: its address is spent, or
    # no verify slot is free for it. Nothing is counted.
    wait = dashboard.limits.address_wait(address)
    if wait > 0:
        return too_many(request, token, limited(wait), int(wait) + 1)
    busy = dashboard.hashing.wait_for(address)
    if busy > 0:
        return too_many(request, token, BUSY, math.ceil(busy))
    form = await checked_form(request)
    email = normal_email(form.get("email", "")) or form.get("email", "")[:254]
    # Counted before the check, with no await between the count and the claim of a verify slot: tries that
    # arrive together each see the ones before them.
    wait = dashboard.limits.take(email, address)
    if wait > 0:
        return too_many(request, token, limited(wait), int(wait) + 1)
    person = edge.accounts.people.person_by_email(email)
    matched = await dashboard.hashing.matches(address, person, form.get("password", ""))
    if matched is None:
        dashboard.limits.untried(email, address)
        return too_many(request, token, BUSY, math.ceil(dashboard.hashing.wait_for(address)) or 1)
    if not matched or person is None:
        answer = page(request, "signin.html", None, csrf=csrf_for(token), problem=WRONG, email=email)
        answer.set_status(401)
        return with_form_cookie(answer, token, edge)
    dashboard.limits.succeeded(address)
    return await start_session(request, person.person_id, person.account_id)


async def signout(request: web.Request) -> web.Response:
    me = signed_in(request)
    await form_of(request, me, change=False)
    record = {"kind": "session.ended", "account_id": me.session.account_id, "session_digest": ids.digest(me.token)}
    await append_record(edge_of(request), record)
    response = web.HTTPSeeOther(f"{PREFIX}/signin")
    clear_session_cookie(response)
    raise response


async def signout_everywhere(request: web.Request) -> web.Response:
    """Ends every session of this person, on every edge (each folds the record within a second)."""
    me = signed_in(request)
    await form_of(request, me, change=False)
    record = {"kind": "sessions.ended", "account_id": me.session.account_id, "person_id": me.person.person_id}
    await append_record(edge_of(request), record)
    response = web.HTTPSeeOther(f"{PREFIX}/signin")
    clear_session_cookie(response)
    raise response


def add_routes(app: web.Application) -> None:
    app.router.add_get(f"{PREFIX}/setup/{{token}}", setup_page)
    app.router.add_post(f"{PREFIX}/setup/{{token}}", setup_submit)
    app.router.add_get(f"{PREFIX}/signin", signin_page)
    app.router.add_post(f"{PREFIX}/signin", signin_submit)
    app.router.add_post(f"{PREFIX}/signout", signout)
    app.router.add_post(f"{PREFIX}/signout-everywhere", signout_everywhere)
