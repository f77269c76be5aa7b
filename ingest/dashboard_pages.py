"""The dashboard's pages (docs/dashboard.md, Pages): what a signed-in person sees, and the changes an
owner makes. Reads ask the workers the same questions the API asks, for the person's own account only;
changes are the records the admin commands append (domain.commands).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from aiohttp import web

from domain import commands, keys
from domain.accounts import PLANS, PLATFORMS, Account
from domain.channels import CHANNELS, DEFAULT_FLOOR, PLAN_CHANNELS
from domain.index import AlertEntry, CallEntry
from domain.outbound import settings_body
from domain.phone import parse_number
from domain.policy import RELIEF_REASONS, policy_body
from domain.queries import AlertGet, AlertsList, CallGet, CallsList, NumbersList
from domain.rules import DAY_MS, HOUR_MS, ScoringRules
from domain.shadow import ACTIONS, Run
from domain.times import format_ms, parse_day, parse_ms
from domain.validation import InputError
from infra import webhook_url
from infra.clock import now_ms
from ingest.chart import daily_chart, hourly_chart
from ingest.dashboard import (
    DASHBOARD,
    PREFIX,
    PageError,
    account_of,
    append_change,
    form_of,
    page,
    signed_in,
)
from ingest.errors import ApiError
from ingest.routes_account import account_body
from ingest.routes_evaluation import evaluate
from ingest.routes_labels import label_call
from ingest.routes_platforms import DELIVERIES, LastDelivery
from ingest.routes_reads import merge_pages
from ingest.routes_shadow import start_shadow
from ingest.service import Edge, edge_of
from ingest.sessions import SignedIn

CHART_HOURS = 24
# The shadow form's window until the owner picks one: the last week.
SHADOW_DAYS = 7
# The overview's chart reads at most this many of the last day's calls (newest first).
CHART_CALLS = 2_000
PAGE_SIZE = 50
FLOORS = ("info", "threat", "critical")
ACCURACY_DAYS = 30


async def calls_page(edge: Edge, account: Account, limit: int, **filters: Any) -> dict[str, Any]:
    question = CallsList(account_id=account.id, limit=limit, **filters)
    return merge_pages(await edge.query_all(question), "calls", list[CallEntry], limit)


async def alerts_page(edge: Edge, account: Account, limit: int) -> list[dict[str, Any]]:
    question = AlertsList(account_id=account.id, limit=limit)
    return list(merge_pages(await edge.query_all(question), "alerts", list[AlertEntry], limit)["data"])


def missed(alert: dict[str, Any]) -> bool:
    return not all(alert["delivered"].values())


async def overview(request: web.Request) -> web.Response:
    me = signed_in(request)
    edge, account = edge_of(request), account_of(me, request)
    now = now_ms()
    since = now - CHART_HOURS * HOUR_MS
    recent: list[dict[str, Any]] = []
    cursor = None
    while len(recent) < CHART_CALLS:
        found = await calls_page(edge, account, 200, since=since, cursor=cursor)
        recent += found["data"]
        cursor = found["next_cursor"]
        if cursor is None:
            break
    chart = hourly_chart(recent, now, CHART_HOURS)
    return page(
        request,
        "overview.html",
        me,
        usage=await account_body(edge, account),
        alerts=await alerts_page(edge, account, 5),
        chart=chart,
        sampled=cursor is not None,
    )


def call_filters(request: web.Request) -> tuple[dict[str, Any], dict[str, str]]:
    """The calls page's filters as a question's fields, and as given (to fill the form again)."""
    given = {name: request.query.get(name, "").strip() for name in ("number", "action", "source")}
    filters: dict[str, Any] = {}
    if given["number"]:
        number = parse_number(given["number"])
        if number is None:
            raise PageError(400, "That is not a phone number.")
        filters["number"] = number.e164
    if given["action"]:
        if given["action"] not in ("allow", "review", "reject"):
            raise PageError(400, "Pick allow, review or reject.")
        filters["action"] = given["action"]
    if given["source"]:
        filters["source"] = given["source"][:256]
    cursor = request.query.get("cursor")
    if cursor:
        filters["cursor"] = cursor
    return filters, given


async def calls(request: web.Request) -> web.Response:
    me = signed_in(request)
    edge, account = edge_of(request), account_of(me, request)
    filters, given = call_filters(request)
    found = await calls_page(edge, account, PAGE_SIZE, **filters)
    return page(request, "calls.html", me, calls=found["data"], next_cursor=found["next_cursor"], given=given)


async def live_calls(request: web.Request) -> web.Response:
    """Calls still open, with their flags; the page fetches this fragment again every 2 s."""
    me = signed_in(request)
    edge, account = edge_of(request), account_of(me, request)
    found = await calls_page(edge, account, 200, since=now_ms() - 6 * HOUR_MS)
    live = [call for call in found["data"] if call["ended_at"] is None]
    template = "live_rows.html" if request.query.get("fragment") else "live.html"
    return page(request, template, me, calls=live)


async def call(request: web.Request) -> web.Response:
    me = signed_in(request)
    edge, account = edge_of(request), account_of(me, request)
    call_id = request.match_info["call_id"]
    reply = await edge.query(CallGet(account_id=account.id, call_id=call_id), keys.call(account.id, call_id))
    if reply["status"] == 200 and "alias_of" in reply["body"]:
        target = reply["body"]["alias_of"]
        reply = await edge.query(CallGet(account_id=account.id, call_id=target), keys.call(account.id, target))
    if reply["status"] != 200:
        raise PageError(404, "There is no such call in this account.")
    record = reply["body"]
    return page(request, "call.html", me, call=record, timeline=timeline(record))


async def call_label(request: web.Request) -> web.Response:
    """The call page's Spam and Good buttons: the same label `POST /v1/calls/<call_id>/label` appends."""
    me = signed_in(request)
    form = await form_of(request, me)
    call_id = request.match_info["call_id"]
    try:
        reply = await label_call(edge_of(request), account_of(me, request), call_id, {"label": form.get("label")})
    except InputError as refused:
        raise PageError(400, "Pick spam or good.") from refused
    if reply["status"] != 200:
        raise PageError(404, "There is no such call in this account.")
    raise web.HTTPSeeOther(f"{PREFIX}/calls/{quote(reply['body']['call_id'], safe='')}")


def timeline(record: dict[str, Any]) -> list[tuple[str, str]]:
    """A call's life in order: answered, what it did live, settled."""
    steps = [(record["at"], f"Started: {record['action']} at score {record['score']}")]
    if record["user_turns"] or record["agent_turns"]:
        turns = f"{record['user_turns']} caller turns, {record['agent_turns']} agent turns"
        steps.append((record["at"], f"Live: {turns}, {record['interruptions']} interruptions"))
    for flag in record["flags"]:
        steps.append((record["at"], f"Flag raised: {flag}"))
    if record["ended_at"]:
        settled = f", spam score {record['spam_score']}" if record["spam_score"] is not None else ""
        steps.append((record["ended_at"], f"Ended: {record['reason'] or 'completed'}{settled}"))
    if record.get("label"):
        steps.append((record["labelled_at"], f"Labelled {record['label']}"))
    return steps


async def alerts(request: web.Request) -> web.Response:
    me = signed_in(request)
    edge, account = edge_of(request), account_of(me, request)
    found = await alerts_page(edge, account, 100)
    # Missed ones first, newest first within each group (the list comes newest first).
    ordered = [a for a in found if missed(a)] + [a for a in found if not missed(a)]
    return page(request, "alerts.html", me, alerts=ordered, missed=missed)


async def alert(request: web.Request) -> web.Response:
    me = signed_in(request)
    edge, account = edge_of(request), account_of(me, request)
    question = AlertGet(account_id=account.id, alert_id=request.match_info["alert_id"])
    reply = await edge.query(question, account.id)
    if reply["status"] != 200:
        raise PageError(404, "There is no such alert in this account.")
    return page(request, "alert.html", me, alert=reply["body"], missed=missed)


async def api_keys(request: web.Request) -> web.Response:
    me = signed_in(request)
    return page(request, "keys.html", me, made=None)


async def key_create(request: web.Request) -> web.Response:
    me = signed_in(request)
    form = await form_of(request, me)
    scope = form.get("scope", "")
    label = form.get("label", "").strip()[:100]
    limit = edge_of(request).settings.rules.limits.max_keys_per_account
    made = await append_change(request, commands.create_key(account_of(me, request), scope, label, limit))
    return page(request, "keys.html", me, made=made)


async def key_revoke(request: web.Request) -> web.Response:
    me = signed_in(request)
    await form_of(request, me)
    await append_change(request, commands.revoke_key(account_of(me, request), request.match_info["key_id"]))
    raise web.HTTPSeeOther(f"{PREFIX}/keys")


async def live_events(request: web.Request, shown: dict[str, Any] | None = None) -> web.Response:
    me = signed_in(request)
    edge, account = edge_of(request), account_of(me, request)
    question = NumbersList(account_id=account.id, plan=account.plan, now=now_ms())
    listed = (await edge.query(question, account.id))["body"]["data"]
    numbers = sorted({n["number"] for n in listed} | set(account.gates) | set(account.gate_token_digests))
    return page(request, "live_events.html", me, numbers=numbers, shown=shown or {})


async def ingest_token_rotate(request: web.Request) -> web.Response:
    me = signed_in(request)
    await form_of(request, me)
    made = await append_change(request, commands.rotate_token(account_of(me, request), "ingest"))
    return await live_events(request, {"ingest": made["token"]})


async def gate_token_rotate(request: web.Request) -> web.Response:
    me = signed_in(request)
    form = await form_of(request, me)
    number = form.get("number", "")
    made = await append_change(request, commands.rotate_token(account_of(me, request), "gate", number))
    return await live_events(request, {"gate": made["token"], "number": number})


async def number_remove(request: web.Request) -> web.Response:
    me = signed_in(request)
    form = await form_of(request, me)
    await append_change(request, commands.remove_number(account_of(me, request), form.get("number", "")))
    raise web.HTTPSeeOther(f"{PREFIX}/live-events")


def carrier_token_given(form: dict[str, str]) -> str | None:
    """The gate form's carrier auth token: a new one replaces, "clear" empties it, neither keeps it (the
    page never shows a stored token, so an empty field means "unchanged"). Sealed by `append_change`."""
    token = form.get("carrier_auth_token", "").strip()
    clear = form.get("carrier_auth_token_clear") == "on"
    if token and clear:
        raise PageError(400, "Either enter a new carrier auth token or clear it, not both.")
    if clear:
        return ""
    return token or None


async def gate_set(request: web.Request) -> web.Response:
    me = signed_in(request)
    form = await form_of(request, me)
    edge = edge_of(request)
    forward_url = form.get("forward_url", "").strip() or None
    if forward_url is not None and (why := await webhook_url.refusal_under(edge.settings, forward_url)):
        raise PageError(400, f"That forward URL cannot be used ({why}).")
    change = commands.set_gate(
        account_of(me, request),
        form.get("number", ""),
        forward_url,
        form.get("review") or None,
        form.get("unavailable") or None,
        carrier_token_given(form),
        form.get("hang_up_suspicious") == "on",
    )
    await append_change(request, change)
    raise web.HTTPSeeOther(f"{PREFIX}/live-events")


async def channels(request: web.Request, secret: str | None = None) -> web.Response:
    me = signed_in(request)
    account = account_of(me, request)
    available = edge_of(request).settings.channels_available
    return page(
        request,
        "channels.html",
        me,
        channels=CHANNELS,
        floors=FLOORS,
        default_floor=DEFAULT_FLOOR,
        on_plan=PLAN_CHANNELS[account.plan],
        available=available,
        secret=secret,
        tested=request.query.get("tested") == "1",
    )


async def webhook_set(request: web.Request) -> web.Response:
    me = signed_in(request)
    form = await form_of(request, me)
    edge, account = edge_of(request), account_of(me, request)
    url = form.get("url", "").strip() or None
    if url is not None and (why := await webhook_url.refusal_under(edge.settings, url)):
        raise PageError(400, f"That webhook URL cannot be used ({why}).")
    await append_change(request, commands.set_webhook(account, url))
    raise web.HTTPSeeOther(f"{PREFIX}/channels")


async def secret_reveal(request: web.Request) -> web.Response:
    me = signed_in(request)
    await form_of(request, me)
    stored = account_of(me, request).signing_secret
    edge = edge_of(request)
    return await channels(request, request.app[DASHBOARD].sealer(edge).open(stored))


async def secret_rotate(request: web.Request) -> web.Response:
    me = signed_in(request)
    await form_of(request, me)
    made = await append_change(request, commands.rotate_secret(account_of(me, request), now_ms()))
    return await channels(request, made["signing_secret"])


async def channel_set(request: web.Request) -> web.Response:
    me = signed_in(request)
    form = await form_of(request, me)
    destinations = [line.strip() for line in form.get("to", "").replace(",", "\n").splitlines() if line.strip()]
    change = commands.set_channel(account_of(me, request), form.get("channel", ""), destinations, form.get("floor"))
    await append_change(request, change)
    raise web.HTTPSeeOther(f"{PREFIX}/channels")


async def test_alert(request: web.Request) -> web.Response:
    """An `alert.test_requested` record; a worker raises the `alert.test` (critical, so it reaches every
    channel whatever its floor) on the alerts topic, which the edge does not write."""
    me = signed_in(request)
    await form_of(request, me)
    await append_change(
        request, commands.request_test_alert(account_of(me, request), me.person.person_id, me.person.email)
    )
    raise web.HTTPSeeOther(f"{PREFIX}/channels?tested=1")


async def trusted(request: web.Request) -> web.Response:
    return page(request, "trusted.html", signed_in(request))


async def trusted_change(request: web.Request) -> web.Response:
    me = signed_in(request)
    form = await form_of(request, me)
    add = request.match_info["action"] == "add"
    await append_change(request, commands.trust(account_of(me, request), add, form.get("number", "")))
    raise web.HTTPSeeOther(f"{PREFIX}/trusted")


def accuracy_window(request: web.Request, today: int) -> tuple[int, int, dict[str, str]]:
    """The Accuracy page's window from its two dates (the last `ACCURACY_DAYS` days by default), as
    [since, until) in ms, and as given."""
    given = {name: request.query.get(name, "").strip() for name in ("since", "until")}
    until_day = parse_day(given["until"]) if given["until"] else today
    if until_day is None:
        raise PageError(400, "Give dates as YYYY-MM-DD.")
    since_day = parse_day(given["since"]) if given["since"] else until_day - (ACCURACY_DAYS - 1) * DAY_MS
    if since_day is None:
        raise PageError(400, "Give dates as YYYY-MM-DD.")
    if since_day > until_day:
        raise PageError(400, "The window ends before it starts.")
    shown = {"since": format_ms(since_day)[:10], "until": format_ms(until_day)[:10]}
    return since_day, until_day + DAY_MS, shown


async def accuracy(request: web.Request) -> web.Response:
    me = signed_in(request)
    edge, account = edge_of(request), account_of(me, request)
    now = now_ms()
    since, until, given = accuracy_window(request, now - now % DAY_MS)
    found = await evaluate(edge, account.id, since, until)
    return page(request, "accuracy.html", me, evaluation=found, given=given)


async def policy(request: web.Request) -> web.Response:
    me = signed_in(request)
    defaults = edge_of(request).settings.rules.scoring
    effective = policy_body(account_of(me, request).policy, defaults)
    saved = request.query.get("saved") == "1"
    return page(request, "policy.html", me, policy=effective, defaults=policy_body(None, defaults), saved=saved)


def policy_form(form: dict[str, str], defaults: ScoringRules) -> dict[str, Any]:
    """The Policy page's form as a `domain.policy.parse_policy` body: only what differs from the defaults,
    so a later change of a deployment default reaches every weight the owner left alone."""
    given = policy_body(None, defaults)

    def number(name: str) -> Any:
        raw = form.get(name, "").strip()
        try:
            return float(raw)
        except ValueError:
            return raw

    thresholds = {name: value for name in ("review", "reject") if (value := number(name)) != given["thresholds"][name]}
    weights = {
        reason: value
        for reason in given["weights"]
        if (value := number(f"weight.{reason}")) != given["weights"][reason]
    }
    off = [reason for reason in (*given["weights"], *RELIEF_REASONS) if form.get(f"off.{reason}") == "on"]
    return {"thresholds": thresholds, "weights": weights, "off": off}


async def policy_set(request: web.Request) -> web.Response:
    me = signed_in(request)
    form = await form_of(request, me)
    defaults = edge_of(request).settings.rules.scoring
    body = {} if form.get("reset") == "1" else policy_form(form, defaults)
    await append_change(request, commands.set_policy(account_of(me, request), body, defaults))
    raise web.HTTPSeeOther(f"{PREFIX}/policy?saved=1")


async def outbound(request: web.Request) -> web.Response:
    me = signed_in(request)
    settings = settings_body(account_of(me, request).outbound)
    changed = request.query.get("saved") == "1"
    return page(
        request, "outbound.html", me, outbound=settings, saved=changed, resumed=request.query.get("resumed") == "1"
    )


def outbound_form(form: dict[str, str]) -> dict[str, Any]:
    """The Outbound page's form as a `domain.outbound.parse_settings` body: empty countries go back to the
    protected numbers' countries, an empty transfer list allows no transfer."""
    countries = [item.strip() for item in form.get("countries", "").replace(",", " ").split() if item.strip()]
    transfer = [item.strip() for item in form.get("transfer", "").replace(",", " ").split() if item.strip()]
    return {"countries": countries or None, "transfer": transfer, "pause_on": form.get("pause_on", "")}


async def outbound_set(request: web.Request) -> web.Response:
    me = signed_in(request)
    form = await form_of(request, me)
    await append_change(request, commands.set_outbound(account_of(me, request), outbound_form(form)))
    raise web.HTTPSeeOther(f"{PREFIX}/outbound?saved=1")


async def outbound_resume(request: web.Request) -> web.Response:
    me = signed_in(request)
    await form_of(request, me)
    await append_change(request, commands.resume_outbound(account_of(me, request)))
    raise web.HTTPSeeOther(f"{PREFIX}/outbound?resumed=1")


@dataclass(frozen=True)
class Platform:
    """How the Integrations page names a platform, its secret, and where its URL goes."""

    name: str
    secret: str
    paste: str


PLATFORM_PAGES = {
    "vapi": Platform(
        "Vapi", "HMAC credential secret", "the assistant's or phone number's Server URL, with an HMAC credential"
    ),
    "retell": Platform("Retell", "API key with the webhook badge", "the agent's webhook URL"),
    "twilio": Platform("Twilio", "Auth token", "the number's status callback URL"),
    "livekit": Platform("LiveKit", "API secret", "the project's webhook URL"),
    "bland": Platform("Bland", "Webhook signing secret", "the call's webhook URL"),
    "elevenlabs": Platform("ElevenLabs", "Webhook secret", "the agent's post-call webhook URL"),
}
# A pasted secret or LiveKit key longer than this is refused, never cut short (a cut secret checks nothing).
MAX_SECRET_CHARS = 2048


@dataclass(frozen=True)
class IntegrationCard:
    platform: str
    about: Platform
    configured: bool
    # LiveKit's API key (not a secret: the JWT's `iss`); the secret itself is never read here.
    key: str
    last: LastDelivery | None

    @property
    def last_at(self) -> str:
        return "" if self.last is None else format_ms(self.last.at)[:19].replace("T", " ") + " UTC"


def base_url(request: web.Request) -> str:
    """The address platforms post to: `CALLSCREEN_PUBLIC_URL`, else the one this page was opened at (what
    the edge signs Twilio's URL with when it has no public URL either)."""
    return edge_of(request).settings.public_url.rstrip("/") or str(request.url.origin())


async def integrations(request: web.Request) -> web.Response:
    me = signed_in(request)
    account = account_of(me, request)
    deliveries = request.app[DELIVERIES]
    cards = [
        IntegrationCard(
            platform,
            PLATFORM_PAGES[platform],
            platform in account.integrations,
            account.integrations[platform].key if platform in account.integrations else "",
            deliveries.last(account.id, platform),
        )
        for platform in PLATFORMS
    ]
    saved, removed = request.query.get("saved"), request.query.get("removed")
    return page(
        request,
        "integrations.html",
        me,
        cards=cards,
        base=base_url(request),
        public_url_set=bool(edge_of(request).settings.public_url),
        saved=PLATFORM_PAGES[saved].name if saved in PLATFORM_PAGES else None,
        removed=PLATFORM_PAGES[removed].name if removed in PLATFORM_PAGES else None,
    )


async def integration_set(request: web.Request) -> web.Response:
    """A platform's secret (and LiveKit's API key), sealed by `append_change` as `callscreen integration set`
    seals it; the page then says "configured" and never shows it."""
    me = signed_in(request)
    form = await form_of(request, me)
    platform = form.get("platform", "")
    secret = form.get("secret", "").strip()
    key = form.get("key", "").strip() if platform == "livekit" else ""
    if len(secret) > MAX_SECRET_CHARS or len(key) > MAX_SECRET_CHARS:
        raise PageError(400, f"A secret or key is at most {MAX_SECRET_CHARS} characters: check what was pasted.")
    await append_change(request, commands.set_integration(account_of(me, request), platform, secret, key))
    raise web.HTTPSeeOther(f"{PREFIX}/integrations?saved={platform}")


async def integration_remove(request: web.Request) -> web.Response:
    me = signed_in(request)
    form = await form_of(request, me)
    platform = form.get("platform", "")
    await append_change(request, commands.remove_integration(account_of(me, request), platform))
    raise web.HTTPSeeOther(f"{PREFIX}/integrations?removed={platform}")


async def plan(request: web.Request) -> web.Response:
    me = signed_in(request)
    rules = edge_of(request).settings.rules.plans
    return page(request, "plan.html", me, plans=[(name, rules.plan(name)) for name in PLANS])


async def plan_set(request: web.Request) -> web.Response:
    me = signed_in(request)
    form = await form_of(request, me)
    await append_change(request, commands.set_plan(account_of(me, request), form.get("plan", "")))
    raise web.HTTPSeeOther(f"{PREFIX}/plan")


def own_run(me: SignedIn, request: web.Request, run_id: str | None) -> Run | None:
    """The run asked for by id (404 when it is not this account's), else the account's latest."""
    shadows = edge_of(request).shadows
    account = account_of(me, request)
    if run_id is None:
        return shadows.latest(account.id)
    run = shadows.of(account.id, run_id)
    if run is None:
        raise PageError(404, "There is no such shadow run in this account.")
    return run


async def shadow(request: web.Request) -> web.Response:
    """The Shadow page: a candidate policy's form, and the account's run with its progress or result. With
    `fragment=1`, the run alone, which the page fetches again every 2 s while it runs."""
    me = signed_in(request)
    defaults = edge_of(request).settings.rules.scoring
    run = own_run(me, request, request.query.get("run"))
    result = run.body() if run is not None else None
    shown: dict[str, Any] = {"run": run, "result": result, "actions": ACTIONS}
    if result is not None and result["state"] == "done":
        shown["chart"] = daily_chart(result["daily"])
    if request.query.get("fragment") == "1":
        return page(request, "shadow_run.html", me, **shown)
    now = now_ms()
    # Until the next whole hour: a run then reads every call started up to now.
    window = {"since": format_ms(now - SHADOW_DAYS * DAY_MS)[:16], "until": format_ms(now + HOUR_MS)[:13] + ":00"}
    effective, given = policy_body(account_of(me, request).policy, defaults), policy_body(None, defaults)
    return page(request, "shadow.html", me, policy=effective, defaults=given, window=window, **shown)


def form_time(raw: str) -> str:
    """A `datetime-local` field's value, in UTC as the page says, as the API's ISO 8601 with a zone."""
    return raw if parse_ms(raw) is not None else f"{raw}Z"


async def shadow_start(request: web.Request) -> web.Response:
    me = signed_in(request)
    form = await form_of(request, me)
    defaults = edge_of(request).settings.rules.scoring
    body = {
        "since": form_time(form.get("since", "")),
        "until": form_time(form.get("until", "")),
        "policy": policy_form(form, defaults),
    }
    try:
        started = await start_shadow(edge_of(request), account_of(me, request), body)
    except ApiError as refused:
        if refused.code == "shadow_running":
            raise PageError(409, "A shadow run is still running: wait for it to finish.") from refused
        field = refused.context.get("field", "")
        message = SHADOW_REFUSALS.get(field, f"That policy was refused at {field}: {POLICY_RULE}")
        raise PageError(refused.status, message) from refused
    raise web.HTTPSeeOther(f"{PREFIX}/shadow?run={started['id']}")


async def shadow_apply(request: web.Request) -> web.Response:
    """A finished run's "Apply this policy": the same `policy.set` the Policy page appends."""
    me = signed_in(request)
    form = await form_of(request, me)
    run = own_run(me, request, form.get("run", ""))
    if run is None or not run.done:
        raise PageError(409, "Only a finished shadow run's policy can be applied.")
    defaults = edge_of(request).settings.rules.scoring
    await append_change(request, commands.set_policy(account_of(me, request), run.policy, defaults))
    raise web.HTTPSeeOther(f"{PREFIX}/policy?saved=1")


SHADOW_REFUSALS = {
    "since": "Give the window's start as a date and time.",
    "until": "Give the window's end as a date and time after its start, at most 31 days after it.",
}


def refused_page(handler: Any) -> Any:
    """A refused change shows its reason on an error page, with the status the API would give."""

    async def run(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)  # type: ignore[no-any-return]
        except commands.Refused as refused:
            status = 402 if str(refused) == "plan_required" else 404 if str(refused).startswith("unknown") else 400
            message = REFUSALS.get(str(refused), f"That change was refused ({refused}).")
            if str(refused) == "invalid_field":
                field = str(refused.context.get("field"))
                message = (
                    f"That policy was refused at {field}: {POLICY_RULE}"
                    if field.startswith("policy")
                    else f"Those outbound settings were refused at {field}: {OUTBOUND_RULE}"
                )
            raise PageError(status, message) from refused

    return run


POLICY_RULE = "thresholds and weights are numbers from 0 to 1, and review is at most reject."
OUTBOUND_RULE = "countries are two-letter codes (US, CA); transfer entries are E.164 numbers or prefixes (+1415)."
REFUSALS = {
    "plan_required": "Text and voice alerts need the Guard plan.",
    "key_limit": "This account has as many keys as it may hold: revoke one first.",
    "invalid_email": "That is not an email address.",
    "invalid_number": "That is not a phone number.",
    "too_many_destinations": "A channel takes at most 5 destinations.",
    "invalid_scope": "Pick a scope: full or read.",
    "unknown_key": "There is no such key in this account.",
    "invalid_plan": "Pick watch or guard.",
    "unknown_platform": "There is no such platform.",
    "invalid_secret": "Enter the platform's secret.",
    "invalid_key": "LiveKit signs its webhooks with an API key and its secret: enter both.",
    "integration_not_configured": "That platform has no secret saved: there is nothing to remove.",
    "not_paused": "Outbound calls are not paused: there is nothing to resume.",
}


def add_routes(app: web.Application) -> None:
    get, post = app.router.add_get, app.router.add_post
    get(PREFIX, overview)
    get(f"{PREFIX}/calls", calls)
    get(f"{PREFIX}/calls/live", live_calls)
    get(f"{PREFIX}/calls/{{call_id}}", call)
    post(f"{PREFIX}/calls/{{call_id}}/label", call_label)
    get(f"{PREFIX}/alerts", alerts)
    get(f"{PREFIX}/alerts/{{alert_id}}", alert)
    get(f"{PREFIX}/keys", api_keys)
    post(f"{PREFIX}/keys", refused_page(key_create))
    post(f"{PREFIX}/keys/{{key_id}}/revoke", refused_page(key_revoke))
    get(f"{PREFIX}/live-events", live_events)
    post(f"{PREFIX}/live-events/ingest-token", refused_page(ingest_token_rotate))
    post(f"{PREFIX}/live-events/gate-token", refused_page(gate_token_rotate))
    post(f"{PREFIX}/live-events/gate", refused_page(gate_set))
    post(f"{PREFIX}/live-events/number-remove", refused_page(number_remove))
    get(f"{PREFIX}/channels", channels)
    post(f"{PREFIX}/channels/webhook", refused_page(webhook_set))
    post(f"{PREFIX}/channels/secret", refused_page(secret_reveal))
    post(f"{PREFIX}/channels/secret/rotate", refused_page(secret_rotate))
    post(f"{PREFIX}/channels/set", refused_page(channel_set))
    post(f"{PREFIX}/channels/test", refused_page(test_alert))
    get(f"{PREFIX}/integrations", integrations)
    post(f"{PREFIX}/integrations/set", refused_page(integration_set))
    post(f"{PREFIX}/integrations/remove", refused_page(integration_remove))
    get(f"{PREFIX}/trusted", trusted)
    get(f"{PREFIX}/accuracy", accuracy)
    get(f"{PREFIX}/policy", policy)
    post(f"{PREFIX}/policy", refused_page(policy_set))
    get(f"{PREFIX}/shadow", shadow)
    post(f"{PREFIX}/shadow", refused_page(shadow_start))
    post(f"{PREFIX}/shadow/apply", refused_page(shadow_apply))
    post(f"{PREFIX}/trusted/{{action:add|remove}}", refused_page(trusted_change))
    get(f"{PREFIX}/outbound", outbound)
    post(f"{PREFIX}/outbound", refused_page(outbound_set))
    post(f"{PREFIX}/outbound/resume", refused_page(outbound_resume))
    get(f"{PREFIX}/plan", plan)
    post(f"{PREFIX}/plan", refused_page(plan_set))
