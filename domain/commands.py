"""The account changes a person asks for (admin commands, the dashboard): each is one record for the
accounts topic, and what to show the person. Refusals raise `Refused` with the code to print.

Credentials are made here and shown once; the record carries only their digests (docs/api.md,
Credentials), except the signing secret and a gate's carrier auth token, which are needed back: they
leave here in plain text, and the process that appends the record seals them first (README, Secrets at
rest).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

import msgspec

from domain import ids
from domain.accounts import GATE_REVIEW, GATE_UNAVAILABLE, NUMBER_REMOVED, PLANS, PLATFORMS, SCOPES, Account, Gate
from domain.alerts import SEVERITY_RANK, TEST_REQUESTED
from domain.channels import CHANNELS, DEFAULT_FLOOR, MAX_DESTINATIONS, allowed
from domain.outbound import (
    OUTBOUND_RESUMED,
    OUTBOUND_SET,
    OutboundError,
    parse_settings,
    settings_body,
    settings_record,
)
from domain.people import ROLES, PeopleView, invited, new_setup_token, normal_email
from domain.phone import normalise
from domain.policy import POLICY_SET, PolicyError, parse_policy, policy_body, policy_record
from domain.rules import DAY_MS, ScoringRules
from domain.times import format_ms

# For a day after a rotation, deliveries carry a signature with the old secret too.
SECRET_OVERLAP_MS = DAY_MS


class Refused(Exception):
    """A change that cannot be made; its message is the `error` code, `context` what else to print."""

    def __init__(self, code: str, **context: Any) -> None:
        super().__init__(code)
        self.context = context


@dataclass(frozen=True)
class Change:
    record: dict[str, Any]
    shown: dict[str, Any]


def existing(account: Account | None) -> Account:
    if account is None:
        raise Refused("unknown_account")
    return account


def check_plan(plan: str) -> None:
    if plan not in PLANS:
        raise Refused("invalid_plan")


def create_account(plan: str, name: str = "", account_id: str = "") -> Change:
    """A new account; `account_id` only where two logs must hold the same account (tests, migrations)."""
    check_plan(plan)
    account_id = account_id or ids.new_account_id()
    key, key_id = ids.new_key("full"), ids.new_key_id()
    token, secret = ids.new_ingest_token(), ids.new_signing_secret()
    record = {
        "kind": "account.created",
        "account_id": account_id,
        "name": name,
        "plan": plan,
        "key": {"key_id": key_id, "digest": ids.digest(key), "scope": "full", "label": "original"},
        "ingest_token_digest": ids.digest(token),
        "signing_secret": secret,
    }
    shown = {
        "account_id": account_id,
        "key": key,
        "key_id": key_id,
        "ingest_token": token,
        "signing_secret": secret,
        "plan": plan,
    }
    return Change(record, shown)


def create_key(account: Account | None, scope: str, label: str = "", max_keys: int = 20) -> Change:
    found = existing(account)
    if scope not in SCOPES:
        raise Refused("invalid_scope")
    if sum(not key.revoked for key in found.keys.values()) >= max_keys:
        raise Refused("key_limit", limit=max_keys)
    key, key_id = ids.new_key(scope), ids.new_key_id()
    record = {
        "kind": "key.created",
        "account_id": found.id,
        "key_id": key_id,
        "digest": ids.digest(key),
        "scope": scope,
        "label": label,
    }
    return Change(record, {"key_id": key_id, "key": key, "scope": scope, "label": label})


def revoke_key(account: Account | None, key_id: str) -> Change:
    found = existing(account)
    if key_id not in found.keys:
        raise Refused("unknown_key")
    return Change(
        {"kind": "key.revoked", "account_id": found.id, "key_id": key_id}, {"key_id": key_id, "revoked": True}
    )


def rotate_token(account: Account | None, kind: str, number: str | None = None) -> Change:
    found = existing(account)
    record: dict[str, Any] = {"kind": "token.rotated", "account_id": found.id, "token_kind": kind}
    if kind == "ingest":
        token = ids.new_ingest_token()
    elif kind == "gate":
        e164 = normalise(number)
        if e164 is None:
            raise Refused("invalid_number")
        token = ids.new_gate_token()
        record["number"] = e164
    else:
        raise Refused("invalid_kind")
    return Change({**record, "digest": ids.digest(token)}, {"token": token})


def set_plan(account: Account | None, plan: str) -> Change:
    found = existing(account)
    check_plan(plan)
    return Change({"kind": "plan.set", "account_id": found.id, "plan": plan}, {"account_id": found.id, "plan": plan})


def trust(account: Account | None, add: bool, number: str) -> Change:
    found = existing(account)
    e164 = normalise(number)
    if e164 is None:
        raise Refused("invalid_number")
    record = {"kind": "trusted.added" if add else "trusted.removed", "account_id": found.id, "number": e164}
    return Change(record, {"account_id": found.id, "number": e164, "trusted": add})


def set_policy(account: Account | None, body: dict[str, Any], defaults: ScoringRules) -> Change:
    """The account's scoring policy from a `parse_policy` body, replacing the one before; an empty body
    restores the defaults. Shown: every threshold and weight now in effect."""
    found = existing(account)
    try:
        policy = parse_policy(body, defaults)
    except PolicyError as refused:
        raise Refused("invalid_field", field=refused.field) from refused
    record = {"kind": POLICY_SET, "account_id": found.id, "policy": policy_record(policy)}
    return Change(record, {"account_id": found.id, "policy": policy_body(policy, defaults)})


def set_outbound(account: Account | None, body: dict[str, Any]) -> Change:
    """The account's outbound settings (`domain.outbound.parse_settings`): what the body names changes, the
    rest stays. Shown: every setting now in effect, and the pause."""
    found = existing(account)
    try:
        settings = parse_settings(body, found.outbound)
    except OutboundError as refused:
        raise Refused("invalid_field", field=refused.field) from refused
    record = {"kind": OUTBOUND_SET, "account_id": found.id, "outbound": settings_record(settings)}
    return Change(record, {"account_id": found.id, "outbound": settings_body(settings)})


def resume_outbound(account: Account | None) -> Change:
    """The owner's resume after the kill switch paused the account's outbound; a resume with no pause in
    force is refused, so the log holds no resume that ended nothing."""
    found = existing(account)
    if found.outbound is None or found.outbound.paused is None:
        raise Refused("not_paused")
    resumed = msgspec.structs.replace(found.outbound, paused=None)
    record = {"kind": OUTBOUND_RESUMED, "account_id": found.id}
    return Change(record, {"account_id": found.id, "outbound": settings_body(resumed)})


def remove_number(account: Account | None, number: str) -> Change:
    """A protected number removed: it leaves the plan's cap (a new start registers it again), and its gate
    token and settings go. The workers turn the record into the view's fact (`NumberRemoved`)."""
    found = existing(account)
    e164 = normalise(number)
    if e164 is None:
        raise Refused("invalid_number")
    record = {"kind": NUMBER_REMOVED, "account_id": found.id, "number": e164}
    return Change(record, {"account_id": found.id, "number": e164, "removed": True})


def rotate_secret(account: Account | None, now_ms: int) -> Change:
    found = existing(account)
    secret = ids.new_signing_secret()
    until = format_ms(now_ms + SECRET_OVERLAP_MS)
    record = {
        "kind": "secret.rotated",
        "account_id": found.id,
        "signing_secret": secret,
        "previous_valid_until": until,
    }
    return Change(record, {"signing_secret": secret, "previous_valid_until": until})


def set_gate(
    account: Account | None,
    number: str,
    forward_url: str | None = None,
    review: str | None = None,
    unavailable: str | None = None,
    carrier_auth_token: str | None = None,
    hang_up_suspicious: bool | None = None,
) -> Change:
    """A number's gate settings; only the ones given change. The forward URL is checked by the caller,
    which can resolve it (docs/api.md, The carrier gate)."""
    found = existing(account)
    e164 = normalise(number)
    if e164 is None:
        raise Refused("invalid_number")
    if review is not None and review not in GATE_REVIEW:
        raise Refused("invalid_review")
    if unavailable is not None and unavailable not in GATE_UNAVAILABLE:
        raise Refused("invalid_unavailable")
    if hang_up_suspicious and found.plan != "guard":
        raise Refused("plan_required")
    given: dict[str, Any] = {
        "forward_url": forward_url,
        "review": review,
        "unavailable": unavailable,
        "carrier_auth_token": carrier_auth_token,
        "hang_up_suspicious": hang_up_suspicious,
    }
    changed: dict[str, Any] = {name: value for name, value in given.items() if value is not None}
    gate = dataclasses.replace(found.gates.get(e164, Gate()), **changed)
    shown = {
        "number": e164,
        "forward_url": gate.forward_url,
        "review": gate.review,
        "unavailable": gate.unavailable,
        # Whether one is set, never the token itself.
        "carrier_auth_token": bool(gate.carrier_auth_token),
        "hang_up_suspicious": gate.hang_up_suspicious,
    }
    return Change({"kind": "gate.set", "account_id": found.id, "number": e164, **changed}, shown)


def set_integration(account: Account | None, platform: str, secret: str, key: str = "") -> Change:
    """A platform's webhooks taken with `secret` (decisions section 16); LiveKit's need its API key too.
    The secret leaves here in plain text, to be sealed by the process that appends the record."""
    found = existing(account)
    if platform not in PLATFORMS:
        raise Refused("unknown_platform")
    if not secret:
        raise Refused("invalid_secret")
    if platform == "livekit" and not key:
        raise Refused("invalid_key", reason="LiveKit's webhooks are issued by an API key: give it with the secret")
    record = {"kind": "integration.set", "account_id": found.id, "platform": platform, "integration_secret": secret}
    if key:
        record["integration_key"] = key
    return Change(record, {"platform": platform, "configured": True})


def remove_integration(account: Account | None, platform: str) -> Change:
    """The platform's webhooks refused again (409 `integration_not_configured`)."""
    found = existing(account)
    if platform not in PLATFORMS:
        raise Refused("unknown_platform")
    if platform not in found.integrations:
        raise Refused("integration_not_configured")
    record = {"kind": "integration.removed", "account_id": found.id, "platform": platform}
    return Change(record, {"platform": platform, "configured": False})


# Deliberately loose: one @, a dot in the domain, no spaces or angle brackets; the SMTP server decides the rest.
EMAIL = re.compile(r"[^@\s<>,;]{1,64}@[^@\s<>,;]+\.[^@\s<>,;.]+")


def set_webhook(account: Account | None, url: str | None) -> Change:
    """The account's alert webhook URL, or none; the URL is checked by the caller, which can resolve it."""
    found = existing(account)
    return Change({"kind": "webhook.set", "account_id": found.id, "alert_webhook_url": url}, {"alert_webhook_url": url})


def set_channel(account: Account | None, channel: str, to: list[str], floor: str | None = None) -> Change:
    """An alert channel's destinations and floor (docs/api.md, Alert channels); no destinations turns it off."""
    found = existing(account)
    if channel not in CHANNELS:
        raise Refused("invalid_channel")
    if len(to) > MAX_DESTINATIONS:
        raise Refused("too_many_destinations", limit=MAX_DESTINATIONS)
    if floor is not None and floor not in SEVERITY_RANK:
        raise Refused("invalid_floor")
    if to and not allowed(found.plan, channel):
        raise Refused("plan_required")
    clean: list[str] = []
    for destination in to:
        value = destination if channel == "email" else normalise(destination)
        if channel == "email" and (len(destination) > 254 or not EMAIL.fullmatch(destination)):
            raise Refused("invalid_email", to=destination)
        if value is None:
            raise Refused("invalid_number", to=destination)
        if value not in clean:
            clean.append(value)
    before = found.channels.get(channel)
    chosen = floor or (before.floor if before else DEFAULT_FLOOR[channel])
    record = {"kind": "channel.set", "account_id": found.id, "channel": channel, "to": clean, "floor": chosen}
    return Change(record, {"channel": channel, "to": clean, "floor": chosen if clean else None})


def request_test_alert(account: Account | None, person_id: str, email: str) -> Change:
    """A request the workers turn into an `alert.test` on the alerts topic (the edge may not write it)."""
    found = existing(account)
    record = {"kind": TEST_REQUESTED, "account_id": found.id, "person_id": person_id, "email": email}
    return Change(record, {})


def invite_person(
    account: Account | None, people: PeopleView, email: str, role: str, now_ms: int, valid_ms: int
) -> Change:
    """A person who may sign in to the account's dashboard, with a one-time setup link valid for `valid_ms`
    (the deployment's `setup_link_valid_h`).

    Inviting someone already invited (to the same account) gives them a fresh link; their password, if
    any, stays until they use it.
    """
    found = existing(account)
    address = normal_email(email)
    if address is None:
        raise Refused("invalid_email", to=email)
    if role not in ROLES:
        raise Refused("invalid_role")
    before = people.person_by_email(address)
    if before is not None and before.account_id != found.id:
        raise Refused("email_taken")
    link = new_setup_token()
    record = invited(found.id, address, role, link, now_ms, valid_ms, before.person_id if before else "")
    shown = {"person_id": record["person_id"], "email": address, "role": role, "setup_token": link}
    return Change(record, {**shown, "setup_until": record["setup_until"]})
