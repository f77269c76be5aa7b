"""A voice platform's integration on an account: set and removed as account records, its secret sealed
before it is appended, shown only as configured (decisions section 16)."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from domain import commands
from domain.accounts import AccountsView, Integration, apply
from domain.commands import Refused
from infra.sealing import Sealer, sealed

SECRET = "vapi-hmac-secret-0123456789abcdef"


def account_view() -> tuple[AccountsView, str]:
    view = AccountsView()
    change = commands.create_account("guard", account_id="acct_Integration00001")
    apply(view, {"id": "0" * 32, "at": "2026-12-02T09:00:00.000Z", **change.record})
    return view, "acct_Integration00001"


def test_set_shows_only_that_it_is_configured_and_the_record_seals_the_secret() -> None:
    view, account_id = account_view()
    change = commands.set_integration(view.accounts[account_id], "vapi", SECRET)
    assert change.shown == {"platform": "vapi", "configured": True}
    sealer = Sealer([Fernet.generate_key().decode()])
    record = sealed(change.record, lambda: sealer)
    assert SECRET not in str(record)
    assert record["kind"] == "integration.set" and record["platform"] == "vapi"
    apply(view, {"id": "1" * 32, "at": "2026-12-02T09:00:01.000Z", **record})
    stored = view.accounts[account_id].integrations["vapi"]
    assert stored.key == ""
    assert sealer.open(stored.secret) == SECRET


def test_livekit_needs_its_api_key_and_keeps_it() -> None:
    view, account_id = account_view()
    with pytest.raises(Refused, match="invalid_key"):
        commands.set_integration(view.accounts[account_id], "livekit", SECRET)
    change = commands.set_integration(view.accounts[account_id], "livekit", SECRET, key="APIkey123")
    apply(view, {"id": "1" * 32, "at": "2026-12-02T09:00:01.000Z", **change.record})
    assert view.accounts[account_id].integrations == {"livekit": Integration(SECRET, "APIkey123")}


def test_remove_takes_it_out_and_unknown_platforms_or_integrations_are_refused() -> None:
    view, account_id = account_view()
    with pytest.raises(Refused, match="unknown_platform"):
        commands.set_integration(view.accounts[account_id], "zoom", SECRET)
    with pytest.raises(Refused, match="integration_not_configured"):
        commands.remove_integration(view.accounts[account_id], "bland")
    with pytest.raises(Refused, match="invalid_secret"):
        commands.set_integration(view.accounts[account_id], "bland", "")
    change = commands.set_integration(view.accounts[account_id], "bland", SECRET)
    apply(view, {"id": "1" * 32, "at": "2026-12-02T09:00:01.000Z", **change.record})
    removed = commands.remove_integration(view.accounts[account_id], "bland")
    assert removed.shown == {"platform": "bland", "configured": False}
    apply(view, {"id": "2" * 32, "at": "2026-12-02T09:00:02.000Z", **removed.record})
    assert view.accounts[account_id].integrations == {}
