"""Each platform's signature check, on deliveries signed the way the platform signs them: Twilio's with
the Twilio SDK's own signing code, LiveKit's JWT as the LiveKit SDK's AccessToken issues it (PyJWT,
HS256, `iss` the API key, `sha256` the body's hash), the others by their published one-line schemes."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time

import jwt
import pytest
from multidict import CIMultiDict
from twilio.request_validator import RequestValidator

from ingest.platform_signatures import VERIFIERS, Delivery, Secret

BODY = b'{"message":{"type":"status-update","status":"in-progress"}}'
# At least 32 bytes: PyJWT warns of a shorter HMAC key.
SECRET = "whsec-test-0123456789abcdef0123456789abcdef"
NOW = 1_780_000_000.0
PLAIN = Secret(SECRET)


def hex_hmac(secret: str, message: bytes) -> str:
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def delivery(
    headers: dict[str, str], body: bytes = BODY, url: str = "", form: dict[str, str] | None = None
) -> Delivery:
    return Delivery(body, CIMultiDict(headers), url, form)


def check(platform: str, d: Delivery, secret: Secret = PLAIN, now: float = NOW) -> bool:
    return VERIFIERS[platform](d, secret, now)


@pytest.mark.parametrize("timestamp", [str(int(NOW)), str(int(NOW * 1000))])
def test_vapi_signs_the_timestamp_and_body_in_seconds_or_milliseconds(timestamp: str) -> None:
    signature = hex_hmac(SECRET, f"{timestamp}.".encode() + BODY)
    assert check("vapi", delivery({"x-signature": signature, "x-timestamp": timestamp}))
    assert not check("vapi", delivery({"x-signature": signature, "x-timestamp": timestamp}, BODY + b" "))
    assert not check("vapi", delivery({"x-signature": signature, "x-timestamp": timestamp}), Secret("other"))
    assert not check("vapi", delivery({"x-timestamp": timestamp}))


def test_vapi_refuses_a_timestamp_past_five_minutes_and_takes_the_legacy_secret_header() -> None:
    old = str(int(NOW) - 301)
    assert not check("vapi", delivery({"x-signature": hex_hmac(SECRET, f"{old}.".encode() + BODY), "x-timestamp": old}))
    edge = str(int(NOW) - 300)
    assert check("vapi", delivery({"x-signature": hex_hmac(SECRET, f"{edge}.".encode() + BODY), "x-timestamp": edge}))
    assert check("vapi", delivery({"x-vapi-secret": SECRET}))
    assert not check("vapi", delivery({"x-vapi-secret": SECRET + "x"}))


def test_retell_signs_the_body_then_the_milliseconds() -> None:
    ms = str(int(NOW * 1000))
    header = f"v={ms},d={hex_hmac(SECRET, BODY + ms.encode())}"
    assert check("retell", delivery({"x-retell-signature": header}))
    assert not check("retell", delivery({"x-retell-signature": header}, BODY + b"x"))
    late = str(int((NOW - 301) * 1000))
    assert not check("retell", delivery({"x-retell-signature": f"v={late},d={hex_hmac(SECRET, BODY + late.encode())}"}))
    assert not check("retell", delivery({"x-retell-signature": f"d={hex_hmac(SECRET, BODY)}"}))


def test_twilio_is_checked_by_its_sdk_over_the_public_url_and_the_form() -> None:
    url = "https://screen.example.com/v1/ingest/twilio/ing_abc"
    form = {"CallSid": "CA1234", "CallStatus": "ringing", "From": "+447911123456", "To": "+14155552671"}
    signature = RequestValidator(SECRET).compute_signature(url, form)
    assert check("twilio", delivery({"X-Twilio-Signature": signature}, b"", url=url, form=form))
    assert not check("twilio", delivery({"X-Twilio-Signature": signature}, b"", url=url + "x", form=form))
    assert not check("twilio", delivery({"X-Twilio-Signature": signature}, b"", url=url, form={**form, "To": "+1"}))


def livekit_token(body: bytes, key: str = "APIkey123", secret: str = SECRET, expires_s: float = 600) -> str:
    claims = {
        "iss": key,
        "nbf": int(time.time()) - 1,
        "exp": int(time.time() + expires_s),
        "sha256": base64.b64encode(hashlib.sha256(body).digest()).decode(),
    }
    return jwt.encode(claims, secret, algorithm="HS256")


def test_livekit_is_a_jwt_of_the_api_key_over_the_bodys_hash() -> None:
    secret = Secret(SECRET, key="APIkey123")
    assert check("livekit", delivery({"Authorization": livekit_token(BODY)}), secret)
    assert check("livekit", delivery({"Authorization": "Bearer " + livekit_token(BODY)}), secret)
    assert not check("livekit", delivery({"Authorization": livekit_token(BODY)}, BODY + b" "), secret)
    assert not check("livekit", delivery({"Authorization": livekit_token(BODY, key="APIother")}), secret)
    assert not check("livekit", delivery({"Authorization": livekit_token(BODY, secret=SECRET[::-1])}), secret)
    assert not check("livekit", delivery({"Authorization": livekit_token(BODY, expires_s=-60)}), secret)
    assert not check("livekit", delivery({}), secret)


def test_bland_signs_the_body() -> None:
    assert check("bland", delivery({"X-Webhook-Signature": hex_hmac(SECRET, BODY)}))
    assert not check("bland", delivery({"X-Webhook-Signature": hex_hmac(SECRET, BODY + b"x")}))
    assert not check("bland", delivery({}))


def test_elevenlabs_signs_the_seconds_and_body_within_thirty_minutes() -> None:
    t = str(int(NOW) - 1800)
    header = f"t={t},v0={hex_hmac(SECRET, f'{t}.'.encode() + BODY)}"
    assert check("elevenlabs", delivery({"ElevenLabs-Signature": header}))
    assert not check("elevenlabs", delivery({"ElevenLabs-Signature": header}), now=NOW + 1)
    assert not check("elevenlabs", delivery({"ElevenLabs-Signature": header}, BODY + b" "))
    assert not check("elevenlabs", delivery({"ElevenLabs-Signature": f"t={t}"}))
