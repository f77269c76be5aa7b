"""Admin commands: each appends one record to the accounts stream and returns what to print."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import orjson

from callscreen import ids
from callscreen.accounts import PLANS, SCOPES, Account, AccountsView, apply, stamp
from callscreen.follow import TopicFollower
from callscreen.kafka import make_producer
from callscreen.phone import normalise
from callscreen.settings import Settings
from callscreen.times import format_ms, now_ms

SECRET_OVERLAP_MS = 24 * 3600 * 1000


class AdminError(Exception):
    """A refused admin command; its message is the JSON `error` printed on stderr."""


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
        record = stamp(record)
        await self.producer.send_and_wait(self.topic, orjson.dumps(record), key=record["account_id"].encode())
        apply(self.view, record)

    def account(self, account_id: str) -> Account:
        account = self.view.accounts.get(account_id)
        if account is None:
            raise AdminError("unknown_account")
        return account

    async def account_create(self, plan: str, name: str = "", account_id: str = "") -> dict[str, Any]:
        """A new account; `account_id` only where two logs must hold the same account (tests, migrations)."""
        check_plan(plan)
        account_id = account_id or ids.new_account_id()
        key = ids.new_key("full")
        key_id = ids.new_key_id()
        token = ids.new_ingest_token()
        secret = ids.new_signing_secret()
        await self.append(
            {
                "kind": "account.created",
                "account_id": account_id,
                "name": name,
                "plan": plan,
                "key": {"key_id": key_id, "digest": ids.digest(key), "scope": "full", "label": "original"},
                "ingest_token_digest": ids.digest(token),
                "signing_secret": secret,
            }
        )
        return {
            "account_id": account_id,
            "key": key,
            "key_id": key_id,
            "ingest_token": token,
            "signing_secret": secret,
            "plan": plan,
        }

    async def key_create(self, account_id: str, scope: str, label: str = "") -> dict[str, Any]:
        self.account(account_id)
        if scope not in SCOPES:
            raise AdminError("invalid_scope")
        key = ids.new_key(scope)
        key_id = ids.new_key_id()
        await self.append(
            {
                "kind": "key.created",
                "account_id": account_id,
                "key_id": key_id,
                "digest": ids.digest(key),
                "scope": scope,
                "label": label,
            }
        )
        return {"key_id": key_id, "key": key, "scope": scope, "label": label}

    async def key_revoke(self, account_id: str, key_id: str) -> dict[str, Any]:
        if key_id not in self.account(account_id).keys:
            raise AdminError("unknown_key")
        await self.append({"kind": "key.revoked", "account_id": account_id, "key_id": key_id})
        return {"key_id": key_id, "revoked": True}

    async def token_rotate(self, account_id: str, kind: str, number: str | None = None) -> dict[str, Any]:
        self.account(account_id)
        record: dict[str, Any] = {"kind": "token.rotated", "account_id": account_id, "token_kind": kind}
        if kind == "ingest":
            token = ids.new_ingest_token()
        elif kind == "gate":
            e164 = normalise(number)
            if e164 is None:
                raise AdminError("invalid_number")
            token = ids.new_gate_token()
            record["number"] = e164
        else:
            raise AdminError("invalid_kind")
        await self.append({**record, "digest": ids.digest(token)})
        return {"token": token}

    async def plan_set(self, account_id: str, plan: str) -> dict[str, Any]:
        self.account(account_id)
        check_plan(plan)
        await self.append({"kind": "plan.set", "account_id": account_id, "plan": plan})
        return {"account_id": account_id, "plan": plan}

    async def trusted(self, action: str, account_id: str, number: str) -> dict[str, Any]:
        self.account(account_id)
        e164 = normalise(number)
        if e164 is None:
            raise AdminError("invalid_number")
        kind = "trusted.added" if action == "add" else "trusted.removed"
        await self.append({"kind": kind, "account_id": account_id, "number": e164})
        return {"account_id": account_id, "number": e164, "trusted": action == "add"}

    async def secret_show(self, account_id: str) -> dict[str, Any]:
        return {"signing_secret": self.account(account_id).signing_secret}

    async def secret_rotate(self, account_id: str) -> dict[str, Any]:
        self.account(account_id)
        secret = ids.new_signing_secret()
        until = format_ms(now_ms() + SECRET_OVERLAP_MS)
        await self.append(
            {
                "kind": "secret.rotated",
                "account_id": account_id,
                "signing_secret": secret,
                "previous_valid_until": until,
            }
        )
        return {"signing_secret": secret, "previous_valid_until": until}

    async def payment_failed(self, account_id: str, amount_cents: int, attempt: int) -> dict[str, Any]:
        """Append a failed Guard-plan payment to the billing topic, as the billing system would."""
        self.account(account_id)
        if amount_cents < 0 or attempt < 1:
            raise AdminError("invalid_payment")
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


def check_plan(plan: str) -> None:
    if plan not in PLANS:
        raise AdminError("invalid_plan")
