"""Webhook signatures: the header format of docs/api.md, Alert delivery and the receiver's reference check."""

from __future__ import annotations

import hashlib
import hmac

import msgspec
from cryptography.fernet import Fernet

from alerting.signing import parse_header, signature_header, verify
from alerting.webhooks import envelope_bytes, signing_secrets
from domain.accounts import Account
from domain.alerts import Alert
from infra.sealing import Sealer

BODY = b'{"id":"alrt_x","type":"call.suspicious"}'
SECRET = "whsec_" + "a" * 32


def test_header_is_t_and_lowercase_hex_hmac_of_t_dot_body() -> None:
    header = signature_header([SECRET], 1_700_000_000, BODY)
    expected = hmac.new(SECRET.encode(), b"1700000000." + BODY, hashlib.sha256).hexdigest()
    assert header == f"t=1700000000,v1={expected}"


def test_two_secrets_give_two_v1_values() -> None:
    header = signature_header([SECRET, "whsec_old"], 5, BODY)
    assert parse_header(header) is not None
    assert header.count(",v1=") == 2
    assert verify("whsec_old", header, BODY, now=5)


def test_verify_checks_bytes_secret_and_tolerance() -> None:
    header = signature_header([SECRET], 1000, BODY)
    assert verify(SECRET, header, BODY, now=1000)
    assert verify(SECRET, header, BODY, now=1299)
    assert not verify(SECRET, header, BODY, now=1300)
    assert not verify(SECRET, header, BODY, now=700)
    assert not verify("whsec_other", header, BODY, now=1000)
    assert not verify(SECRET, header, BODY + b" ", now=1000)
    assert not verify(SECRET, "v1=abc", BODY, now=1000)
    assert not verify(SECRET, "t=1000", BODY, now=1000)


def test_previous_secret_signs_only_during_its_overlap() -> None:
    sealer = Sealer([Fernet.generate_key().decode()])
    account = Account(
        "acct_x",
        "",
        "guard",
        "",
        signing_secret=sealer.seal("new"),
        # Sealed and plain secrets sign alike: a rotation may follow a secret written before sealing.
        previous_secret="old",
        previous_secret_until="2026-01-02T00:00:00.000Z",
    )
    assert signing_secrets(account, 1767225600000, sealer) == ["new", "old"]
    assert signing_secrets(account, 1767312000000, sealer) == ["new"]


def test_the_body_is_the_envelope_only() -> None:
    alert = msgspec.convert(
        {
            "id": "alrt_1",
            "type": "t",
            "account_id": "acct_1",
            "created_at": "c",
            "data": {},
            "severity": "info",
            "subject": "s",
        },
        Alert,
    )
    assert envelope_bytes(alert) == b'{"id":"alrt_1","type":"t","account_id":"acct_1","created_at":"c","data":{}}'
