"""Each voice platform's webhook signature, checked over the raw bytes before anything is parsed.

The schemes and freshness windows are decisions section 16's table. Twilio's is checked with the Twilio
SDK's own `RequestValidator`, LiveKit's JWT with PyJWT as the LiveKit SDK's `WebhookReceiver` does; the
others are one HMAC each, compared in constant time. A check answers only whether the delivery is the
platform's: it never reads, logs or keeps the body.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import jwt
from twilio.request_validator import RequestValidator

VAPI_FRESH_S = 300
RETELL_FRESH_S = 300
ELEVENLABS_FRESH_S = 1800
# A Vapi timestamp past this is in milliseconds (this many seconds is the year 5138).
MS_FROM = 100_000_000_000


@dataclass(frozen=True)
class Delivery:
    """One webhook request as it arrived: the raw body, its headers, and for Twilio the public URL it was
    posted to and its form."""

    body: bytes
    headers: Mapping[str, str]
    url: str = ""
    form: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Secret:
    """What an integration stores: the platform's secret, and for LiveKit the API key that issues its JWTs."""

    secret: str
    key: str = ""


def _hex_hmac(secret: str, message: bytes) -> str:
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def _fresh(at_s: float, now_s: float, window_s: int) -> bool:
    return abs(now_s - at_s) <= window_s


def _fields(header: str) -> dict[str, str]:
    """`a=1,b=2` as a mapping; a part without `=` is left out."""
    return dict(part.strip().split("=", 1) for part in header.split(",") if "=" in part)


def vapi(delivery: Delivery, secret: Secret, now_s: float) -> bool:
    """Vapi's HMAC credential: `x-signature` is hex HMAC-SHA256 of `<x-timestamp>.<body>`, the timestamp in
    seconds or milliseconds; or the legacy `x-vapi-secret` header equal to the secret."""
    legacy = delivery.headers.get("x-vapi-secret")
    if legacy is not None:
        return _same(legacy, secret.secret)
    signature, timestamp = delivery.headers.get("x-signature"), delivery.headers.get("x-timestamp")
    if signature is None or timestamp is None or not timestamp.isdigit():
        return False
    at = int(timestamp)
    if not _fresh(at / 1000 if at >= MS_FROM else at, now_s, VAPI_FRESH_S):
        return False
    return _same(signature, _hex_hmac(secret.secret, timestamp.encode() + b"." + delivery.body))


def retell(delivery: Delivery, secret: Secret, now_s: float) -> bool:
    """`x-retell-signature: v=<ms>,d=<hex>`: HMAC-SHA256 of the body followed by the milliseconds, keyed with
    the API key, as the Retell SDK's `verify`."""
    fields = _fields(delivery.headers.get("x-retell-signature", ""))
    timestamp, digest = fields.get("v", ""), fields.get("d")
    if digest is None or not timestamp.isdigit() or not _fresh(int(timestamp) / 1000, now_s, RETELL_FRESH_S):
        return False
    return _same(digest, _hex_hmac(secret.secret, delivery.body + timestamp.encode()))


def twilio(delivery: Delivery, secret: Secret, now_s: float) -> bool:
    """`X-Twilio-Signature` over the public URL and the sorted form, by the Twilio SDK's validator. Twilio
    signs no time: a replay is a duplicate start or end, which the fold counts once."""
    signature = delivery.headers.get("X-Twilio-Signature", "")
    # The form as given: a multidict keeps every value of a repeated name, which the validator signs too.
    return bool(RequestValidator(secret.secret).validate(delivery.url, delivery.form or {}, signature))


def livekit(delivery: Delivery, secret: Secret, now_s: float) -> bool:
    """`Authorization` is a JWT (HS256) the API secret signs, issued by the API key, whose `sha256` claim is
    the body's base64 SHA-256, as the LiveKit SDK's `WebhookReceiver.receive` checks it; the JWT's own
    expiry is its freshness."""
    token = delivery.headers.get("Authorization", "").removeprefix("Bearer ").strip()
    try:
        claims = jwt.decode(token, secret.secret, algorithms=["HS256"], issuer=secret.key or None)
    except jwt.PyJWTError:
        return False
    if not secret.key or claims.get("iss") != secret.key:
        return False
    body_hash = base64.b64encode(hashlib.sha256(delivery.body).digest()).decode()
    return _same(str(claims.get("sha256", "")), body_hash)


def bland(delivery: Delivery, secret: Secret, now_s: float) -> bool:
    """`X-Webhook-Signature` is hex HMAC-SHA256 of the body. Bland signs no time: its retry is the same
    call again, which the fold counts once."""
    return _same(delivery.headers.get("X-Webhook-Signature", ""), _hex_hmac(secret.secret, delivery.body))


def elevenlabs(delivery: Delivery, secret: Secret, now_s: float) -> bool:
    """`ElevenLabs-Signature: t=<s>,v0=<hex>`: HMAC-SHA256 of `<t>.<body>`, as the ElevenLabs SDK's
    `construct_event`, within 30 minutes."""
    fields = _fields(delivery.headers.get("ElevenLabs-Signature", ""))
    timestamp, digest = fields.get("t", ""), fields.get("v0")
    if digest is None or not timestamp.isdigit() or not _fresh(int(timestamp), now_s, ELEVENLABS_FRESH_S):
        return False
    return _same(digest, _hex_hmac(secret.secret, timestamp.encode() + b"." + delivery.body))


VERIFIERS: dict[str, Callable[[Delivery, Secret, float], bool]] = {
    "vapi": vapi,
    "retell": retell,
    "twilio": twilio,
    "livekit": livekit,
    "bland": bland,
    "elevenlabs": elevenlabs,
}
