"""A time no ISO 8601 string can hold (before 1970, past the year 9999) is refused naming its field, not
answered 500: the platform's number is the payload's problem, not the edge's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from domain.adapters import PARSERS
from domain.adapters.base import LAST_MS, iso
from domain.validation import InputError
from tests.unit.adapters.adapter_checks import load


def vapi_timestamp(value: float) -> Any:
    payload = load("vapi_status_update")
    payload["message"]["timestamp"] = value
    return payload


def retell_start(value: float) -> Any:
    payload = load("retell_call_ended")
    payload["call"]["start_timestamp"] = value
    return payload


def elevenlabs_start(value: float) -> Any:
    payload = load("elevenlabs_post_call_transcription")
    payload["data"]["metadata"]["start_time_unix_secs"] = value
    return payload


CASES: list[tuple[str, Callable[[float], Any], str]] = [
    ("vapi", vapi_timestamp, "message.timestamp"),
    ("retell", retell_start, "call.start_timestamp"),
    ("elevenlabs", elevenlabs_start, "data.metadata.start_time_unix_secs"),
]


@pytest.mark.parametrize("value", [1e300, -1.0])
@pytest.mark.parametrize(("platform", "payload", "field"), CASES, ids=[c[0] for c in CASES])
def test_a_time_out_of_range_is_refused_naming_its_field(
    platform: str, payload: Callable[[float], Any], field: str, value: float
) -> None:
    with pytest.raises(InputError) as refused:
        PARSERS[platform](payload(value))
    assert (refused.value.code, refused.value.context) == ("invalid_payload", {"field": field})


def test_the_last_writable_millisecond_is_kept_and_the_next_refused() -> None:
    assert iso(LAST_MS, "at") == "9999-12-31T23:59:59.999Z"
    assert iso(0, "at") == "1970-01-01T00:00:00.000Z"
    with pytest.raises(InputError) as refused:
        iso(LAST_MS + 1, "at")
    assert refused.value.context == {"field": "at"}
