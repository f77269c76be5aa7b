"""Admin commands: each appends one record to the accounts stream (`domain.commands` makes it) and
returns what to print.

A new signing secret is shown to its owner here, once, so this process seals it before the record is
appended, and opens it again for `secret show`; a gate's carrier auth token is sealed the same way. Admin
commands that touch a signing secret or a carrier auth token need the deployment's secret key
(infra/sealing.py); the others never read it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson

from domain import commands
from domain.accounts import Account, AccountsView, apply, stamp
from domain.outbound import settings_body
from domain.people import normal_email
from domain.policy import policy_body
from infra.clock import now_ms
from infra.follow import TopicFollower
from infra.kafka import make_producer
from infra.sealing import Sealer, sealed, sealer_for
from infra.settings import Settings
from infra.webhook_url import refusal_under


@dataclass
class Admin:
    """A connection to the accounts stream: the folded view, and a producer to append to it."""

    settings: Settings
    _sealer: Sealer | None = field(default=None, init=False, repr=False)

    def sealer(self) -> Sealer:
        """Read when first needed, so commands that touch no signing secret run without the key."""
        if self._sealer is None:
            self._sealer = sealer_for(self.settings)
        return self._sealer

    async def __aenter__(self) -> Admin:
        self.view = AccountsView()
        self.topic = self.settings.topic("accounts")
        self.follower = TopicFollower(self.settings, self.topic, lambda r: apply(self.view, r))
        self.producer = make_producer(self.settings)
        await self.producer.start()
        await self.follower.start()
        await self.follower.caught_up()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.follower.stop()
        await self.producer.stop()

    async def append(self, record: dict[str, Any]) -> None:
        record = stamp(record, now_ms())
        await self.producer.send_and_wait(self.topic, orjson.dumps(record), key=record["account_id"].encode())
        apply(self.view, record)

    async def change(self, change: commands.Change) -> dict[str, Any]:
        await self.append(sealed(change.record, self.sealer))
        return change.shown

    def account(self, account_id: str) -> Account | None:
        return self.view.accounts.get(account_id)

    async def account_create(self, plan: str, name: str = "", account_id: str = "", email: str = "") -> dict[str, Any]:
        """A new account; with `email`, its owner is invited too and the setup link is printed."""
        if email and normal_email(email) is None:
            raise commands.Refused("invalid_email", to=email)
        if email and self.view.people.person_by_email(email) is not None:
            raise commands.Refused("email_taken")
        created = await self.change(commands.create_account(plan, name, account_id))
        if email:
            invited = await self.user_invite(created["account_id"], email, "owner")
            created = {**created, "setup_url": invited["setup_url"], "setup_until": invited["setup_until"]}
        return created

    async def user_invite(self, account_id: str, email: str, role: str = "owner") -> dict[str, Any]:
        """A person who may sign in to the account's dashboard, and their one-time setup link."""
        change = commands.invite_person(
            self.account(account_id), self.view.people, email, role, now_ms(), self.settings.setup_link_valid_ms
        )
        shown = dict(await self.change(change))
        token = shown.pop("setup_token")
        # The domain's person is the command line's user: its printed contract says `user_id` (decisions, 2).
        return {
            "user_id": shown.pop("person_id"),
            **shown,
            "account_id": account_id,
            "setup_url": f"{self.settings.dashboard_url}/dashboard/setup/{token}",
        }

    async def key_create(self, account_id: str, scope: str, label: str = "") -> dict[str, Any]:
        limit = self.settings.rules.limits.max_keys_per_account
        return await self.change(commands.create_key(self.account(account_id), scope, label, limit))

    async def key_revoke(self, account_id: str, key_id: str) -> dict[str, Any]:
        return await self.change(commands.revoke_key(self.account(account_id), key_id))

    async def token_rotate(self, account_id: str, kind: str, number: str | None = None) -> dict[str, Any]:
        return await self.change(commands.rotate_token(self.account(account_id), kind, number))

    async def plan_set(self, account_id: str, plan: str) -> dict[str, Any]:
        return await self.change(commands.set_plan(self.account(account_id), plan))

    async def number_remove(self, account_id: str, number: str) -> dict[str, Any]:
        return await self.change(commands.remove_number(self.account(account_id), number))

    async def policy_set(self, account_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.change(commands.set_policy(self.account(account_id), body, self.settings.rules.scoring))

    async def policy_show(self, account_id: str) -> dict[str, Any]:
        found = commands.existing(self.account(account_id))
        return {"account_id": found.id, "policy": policy_body(found.policy, self.settings.rules.scoring)}

    async def outbound_set(self, account_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.change(commands.set_outbound(self.account(account_id), body))

    async def outbound_show(self, account_id: str) -> dict[str, Any]:
        found = commands.existing(self.account(account_id))
        return {"account_id": found.id, "outbound": settings_body(found.outbound)}

    async def outbound_resume(self, account_id: str) -> dict[str, Any]:
        return await self.change(commands.resume_outbound(self.account(account_id)))

    async def trusted(self, action: str, account_id: str, number: str) -> dict[str, Any]:
        return await self.change(commands.trust(self.account(account_id), action == "add", number))

    async def gate_set(
        self,
        account_id: str,
        number: str,
        forward_url: str | None = None,
        review: str | None = None,
        unavailable: str | None = None,
        carrier_auth_token: str | None = None,
        hang_up_suspicious: bool | None = None,
    ) -> dict[str, Any]:
        """A number's gate settings; the forward URL must be a place a webhook could go (docs/api.md)."""
        if forward_url is not None and (why := await refusal_under(self.settings, forward_url)):
            raise commands.Refused("invalid_forward_url", reason=why)
        change = commands.set_gate(
            self.account(account_id), number, forward_url, review, unavailable, carrier_auth_token, hang_up_suspicious
        )
        return await self.change(change)

    async def integration_set(self, account_id: str, platform: str, secret: str, key: str = "") -> dict[str, Any]:
        return await self.change(commands.set_integration(self.account(account_id), platform, secret, key))

    async def integration_remove(self, account_id: str, platform: str) -> dict[str, Any]:
        return await self.change(commands.remove_integration(self.account(account_id), platform))

    async def channel_set(
        self, account_id: str, channel: str, to: list[str], floor: str | None = None
    ) -> dict[str, Any]:
        return await self.change(commands.set_channel(self.account(account_id), channel, to, floor))

    async def secret_show(self, account_id: str) -> dict[str, Any]:
        stored = commands.existing(self.account(account_id)).signing_secret
        return {"signing_secret": self.sealer().open(stored)}

    async def secret_rotate(self, account_id: str) -> dict[str, Any]:
        return await self.change(commands.rotate_secret(self.account(account_id), now_ms()))

    async def payment_failed(self, account_id: str, amount_cents: int, attempt: int) -> dict[str, Any]:
        """Append a failed Guard-plan payment to the billing topic, as the billing system would."""
        commands.existing(self.account(account_id))
        if amount_cents < 0 or attempt < 1:
            raise commands.Refused("invalid_payment")
        record = {
            "kind": "payment.failed",
            "id": uuid.uuid4().hex,
            "account_id": account_id,
            "amount_cents": amount_cents,
            "attempt": attempt,
            "at": now_ms(),
        }
        topic = self.settings.topic("billing")
        await self.producer.send_and_wait(topic, orjson.dumps(record), key=account_id.encode())
        return record
