"""Admin commands: each appends one record to the accounts stream (`domain.commands` makes it) and
returns what to print."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import orjson

from domain import commands
from domain.accounts import Account, AccountsView, apply, stamp
from infra.clock import now_ms
from infra.follow import TopicFollower
from infra.kafka import make_producer
from infra.settings import Settings


@dataclass
class Admin:
    """A connection to the accounts stream: the folded view, and a producer to append to it."""

    settings: Settings

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
        await self.append(change.record)
        return change.shown

    def account(self, account_id: str) -> Account | None:
        return self.view.accounts.get(account_id)

    async def account_create(self, plan: str, name: str = "", account_id: str = "") -> dict[str, Any]:
        return await self.change(commands.create_account(plan, name, account_id))

    async def key_create(self, account_id: str, scope: str, label: str = "") -> dict[str, Any]:
        return await self.change(commands.create_key(self.account(account_id), scope, label))

    async def key_revoke(self, account_id: str, key_id: str) -> dict[str, Any]:
        return await self.change(commands.revoke_key(self.account(account_id), key_id))

    async def token_rotate(self, account_id: str, kind: str, number: str | None = None) -> dict[str, Any]:
        return await self.change(commands.rotate_token(self.account(account_id), kind, number))

    async def plan_set(self, account_id: str, plan: str) -> dict[str, Any]:
        return await self.change(commands.set_plan(self.account(account_id), plan))

    async def trusted(self, action: str, account_id: str, number: str) -> dict[str, Any]:
        return await self.change(commands.trust(self.account(account_id), action == "add", number))

    async def secret_show(self, account_id: str) -> dict[str, Any]:
        return {"signing_secret": commands.existing(self.account(account_id)).signing_secret}

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
