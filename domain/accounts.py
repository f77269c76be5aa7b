"""Accounts as an event-sourced stream: the records admin commands append, and their fold.

The fold is a pure function of (view, record); the edge, the workers and the admin command line
all build the same view by folding the accounts topic from its start.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from typing import Any

from domain import outbound
from domain.channels import Channel, allowed, on_plan
from domain.events import KEY_CREDENTIAL
from domain.ids import same_digest
from domain.outbound import Outbound
from domain.people import PeopleView
from domain.people import fold as fold_people
from domain.policy import POLICY_SET, Policy, record_policy
from domain.times import format_ms
from domain.validation import Stamp

PLANS = ("watch", "guard")
SCOPES = ("full", "read")
GATE_REVIEW = ("challenge", "forward")
GATE_UNAVAILABLE = ("forward", "reject")


@dataclass(frozen=True)
class Gate:
    """A protected number's carrier gate (docs/api.md, The carrier gate); the auth token stays sealed."""

    forward_url: str | None = None
    review: str = "challenge"
    unavailable: str = "forward"
    carrier_auth_token: str = ""
    hang_up_suspicious: bool = False


# Voice platforms whose own webhooks an account may point at Callscreen (decisions section 16).
PLATFORMS = ("vapi", "retell", "twilio", "livekit", "bland", "elevenlabs")


@dataclass(frozen=True)
class Integration:
    """A voice platform's webhooks taken as they are: the secret that checks their signature (sealed) and,
    for LiveKit, the API key that issues them."""

    secret: str
    key: str = ""


@dataclass(frozen=True)
class ApiKey:
    key_id: str
    digest: str
    scope: str
    label: str
    revoked: bool = False


# A protected number removed (`domain.commands.remove_number`): its gate goes here, its place in the cap in
# the workers' view.
NUMBER_REMOVED = "number.removed"


@dataclass(frozen=True)
class Account:
    id: str
    name: str
    plan: str
    created_at: str
    keys: dict[str, ApiKey] = field(default_factory=dict)
    ingest_token_digest: str = ""
    gate_token_digests: dict[str, str] = field(default_factory=dict)
    gates: dict[str, Gate] = field(default_factory=dict)
    signing_secret: str = ""
    previous_secret: str = ""
    previous_secret_until: str = ""
    alert_webhook_url: str | None = None
    trusted: frozenset[str] = frozenset()
    # Email, text and voice destinations with their floors (domain.channels); a channel turned off is absent.
    channels: dict[str, Channel] = field(default_factory=dict)
    integrations: dict[str, Integration] = field(default_factory=dict)
    # The account's scoring policy (`domain.policy`), None while it keeps the deployment's.
    policy: Policy | None = None
    # Its outbound settings and pause (`domain.outbound`), None while they are the defaults.
    outbound: Outbound | None = None

    def stamp(self, event_id: str, received_at: int, credential: str = KEY_CREDENTIAL) -> Stamp:
        """What the edge stamps on an event of this account as it stands now: plan, trusted list, policy and
        outbound settings, so a refold answers the event as it was answered."""
        return Stamp(event_id, self.id, self.plan, received_at, self.trusted, credential, self.policy, self.outbound)


@dataclass
class AccountsView:
    """Every account, with lookups from credential digest to account."""

    accounts: dict[str, Account] = field(default_factory=dict)
    key_index: dict[str, tuple[str, str]] = field(default_factory=dict)
    token_index: dict[str, str] = field(default_factory=dict)
    gate_index: dict[str, tuple[str, str]] = field(default_factory=dict)
    people: PeopleView = field(default_factory=PeopleView)
    applied: int = 0

    def by_key_digest(self, key_digest: str) -> tuple[Account, ApiKey] | None:
        found = self.key_index.get(key_digest)
        if found is None:
            return None
        account = self.accounts[found[0]]
        key = account.keys[found[1]]
        if key.revoked or not same_digest(key.digest, key_digest):
            return None
        return account, key

    def by_token_digest(self, token_digest: str) -> Account | None:
        account_id = self.token_index.get(token_digest)
        if account_id is None:
            return None
        account = self.accounts[account_id]
        if not same_digest(account.ingest_token_digest, token_digest):
            return None
        return account

    def by_gate_digest(self, token_digest: str) -> tuple[Account, str] | None:
        """The account and protected number a gate token opens, while it is that number's current token."""
        found = self.gate_index.get(token_digest)
        if found is None:
            return None
        account = self.accounts[found[0]]
        if not same_digest(account.gate_token_digests.get(found[1], ""), token_digest):
            return None
        return account, found[1]


GATE_FIELDS = tuple(f.name for f in dataclasses.fields(Gate))


def stamp(record: dict[str, Any], now_ms: int) -> dict[str, Any]:
    """A record ready to append: a unique id and the time the change was asked for."""
    return {"id": uuid.uuid4().hex, "at": format_ms(now_ms), **record}


def evolve(account: Account | None, record: dict[str, Any]) -> Account | None:
    """The account after one record; unknown kinds and records for unknown accounts change nothing."""
    kind = record.get("kind")
    if kind == "account.created":
        key = record["key"]
        return Account(
            id=record["account_id"],
            name=record.get("name", ""),
            plan=record["plan"],
            created_at=record["at"],
            keys={key["key_id"]: ApiKey(key["key_id"], key["digest"], key["scope"], key.get("label", ""))},
            ingest_token_digest=record["ingest_token_digest"],
            signing_secret=record["signing_secret"],
        )
    if account is None:
        return None
    if kind == "key.created":
        key = ApiKey(record["key_id"], record["digest"], record["scope"], record.get("label", ""))
        return dataclasses.replace(account, keys={**account.keys, key.key_id: key})
    if kind == "key.revoked":
        old = account.keys.get(record["key_id"])
        if old is None:
            return account
        return dataclasses.replace(account, keys={**account.keys, old.key_id: dataclasses.replace(old, revoked=True)})
    if kind == "token.rotated":
        if record["token_kind"] == "gate":
            gates = {**account.gate_token_digests, record["number"]: record["digest"]}
            return dataclasses.replace(account, gate_token_digests=gates)
        return dataclasses.replace(account, ingest_token_digest=record["digest"])
    if kind == NUMBER_REMOVED:
        number = record["number"]
        return dataclasses.replace(
            account,
            gate_token_digests={n: d for n, d in account.gate_token_digests.items() if n != number},
            gates={n: g for n, g in account.gates.items() if n != number},
        )
    if kind == "gate.set":
        number = record["number"]
        before = account.gates.get(number, Gate())
        changed = {name: record[name] for name in GATE_FIELDS if name in record}
        return dataclasses.replace(account, gates={**account.gates, number: dataclasses.replace(before, **changed)})
    if kind == "plan.set":
        plan = record["plan"]
        return dataclasses.replace(account, plan=plan, channels=on_plan(account.channels, plan))
    if kind == "channel.set":
        name, to = record["channel"], tuple(record.get("to") or ())
        kept = {k: v for k, v in account.channels.items() if k != name}
        # Checked before it was appended; a plan change that raced ahead of it still wins.
        if to and allowed(account.plan, name):
            kept[name] = Channel(to, record["floor"])
        return dataclasses.replace(account, channels=kept)
    if kind == "trusted.added":
        return dataclasses.replace(account, trusted=account.trusted | {record["number"]})
    if kind == "trusted.removed":
        return dataclasses.replace(account, trusted=account.trusted - {record["number"]})
    if kind == "secret.rotated":
        return dataclasses.replace(
            account,
            signing_secret=record["signing_secret"],
            previous_secret=account.signing_secret,
            previous_secret_until=record["previous_valid_until"],
        )
    if kind == "integration.set":
        integration = Integration(record["integration_secret"], record.get("integration_key", ""))
        return dataclasses.replace(account, integrations={**account.integrations, record["platform"]: integration})
    if kind == "integration.removed":
        remaining = {name: i for name, i in account.integrations.items() if name != record["platform"]}
        return dataclasses.replace(account, integrations=remaining)
    if kind == POLICY_SET:
        policy = record_policy(record["policy"])
        return dataclasses.replace(account, policy=None if policy.empty else policy)
    if kind in outbound.OUTBOUND_KINDS:
        return dataclasses.replace(account, outbound=outbound.evolve(account.outbound, record))
    if kind == "webhook.set":
        return dataclasses.replace(account, alert_webhook_url=record["alert_webhook_url"])
    return account


def apply(view: AccountsView, record: dict[str, Any]) -> None:
    """Fold one record into the view, keeping the credential indexes in step."""
    account_id = record.get("account_id")
    if not isinstance(account_id, str):
        return
    fold_people(view.people, record)
    before = view.accounts.get(account_id)
    after = evolve(before, record)
    if after is None:
        return
    view.accounts[account_id] = after
    for key in after.keys.values():
        if key.revoked:
            view.key_index.pop(key.digest, None)
        else:
            view.key_index[key.digest] = (account_id, key.key_id)
    if before is not None and before.ingest_token_digest != after.ingest_token_digest:
        view.token_index.pop(before.ingest_token_digest, None)
    view.token_index[after.ingest_token_digest] = account_id
    if before is not None:
        for number, old in before.gate_token_digests.items():
            if after.gate_token_digests.get(number) != old:
                view.gate_index.pop(old, None)
    for number, digest in after.gate_token_digests.items():
        view.gate_index[digest] = (account_id, number)
    view.applied += 1
