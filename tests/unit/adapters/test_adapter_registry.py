"""The registry of platform parsers (domain.adapters.PARSERS): exactly the six platforms the ingest path
names (docs/decisions.md, section 16); any other is the route's 404 `unknown_platform`."""

from __future__ import annotations

import pytest

from domain.adapters import PARSERS
from domain.validation import InputError
from tests.unit.adapters.adapter_checks import refused


def test_every_named_platform_has_a_parser() -> None:
    assert sorted(PARSERS) == ["bland", "elevenlabs", "livekit", "retell", "twilio", "vapi"]


@pytest.mark.parametrize(
    ("platform", "field"),
    [
        ("vapi", "message"),
        ("retell", "event"),
        ("twilio", "CallSid"),
        ("livekit", "event"),
        ("bland", "call_id"),
        ("elevenlabs", "type"),
    ],
)
@pytest.mark.parametrize("payload", [None, [], "text", 3])
def test_a_payload_that_is_no_object_names_the_first_field(platform: str, field: str, payload: object) -> None:
    with pytest.raises(InputError) as excinfo:
        PARSERS[platform](payload)
    refused(excinfo, field)
