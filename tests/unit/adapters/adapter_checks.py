"""What every adapter test shares: its payloads, the validation every produced body must pass, and the
canary check that transcript, summary and recording words reach no body but a turn's `text`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from domain.adapters import Body, Parsed
from domain.events import AnyEvent, encode
from domain.rules import LimitRules
from domain.validation import InputError, Stamp, TimeBounds, parse_event

PAYLOADS = Path(__file__).parent / "payloads"
# Every fixture's call happens on 2025-06-02 from 09:30:00Z; the edge receives its posts at 10:00:00Z.
RECEIVED = 1_748_857_200_000
STAMP = Stamp("ev-adapter", "acct_x", "guard", RECEIVED)
BOUNDS = TimeBounds.of(LimitRules())
# Planted in every fixture's transcript, summary, recording URL and other free text.
CANARY = "PELICAN7"
TEXT_TYPES = ("turn.ended", "transcript")


def load(name: str) -> Any:
    """The fixture `payloads/<name>.json`, decoded."""
    return json.loads((PAYLOADS / f"{name}.json").read_text())


def bodies(parsed: Parsed) -> list[Body]:
    assert isinstance(parsed, list), parsed
    return parsed


def validated(parsed: Parsed) -> list[AnyEvent]:
    """Every body through `parse_event`, as the edge would; none of the events keeps a canary word."""
    events = [parse_event(body, STAMP, BOUNDS) for body in bodies(parsed)]
    for event in events:
        assert CANARY.encode() not in encode(event)
    return events


def assert_private(parsed: Parsed) -> None:
    """The canary appears nowhere in the bodies but a turn's `text` (which validation measures and drops)."""
    for body in bodies(parsed):
        if "text" in body:
            assert body["type"] in TEXT_TYPES
        rest = {key: value for key, value in body.items() if key != "text"}
        assert CANARY not in json.dumps(rest)


def refused(excinfo: pytest.ExceptionInfo[InputError], field: str) -> None:
    """The refusal is 400 `invalid_payload` naming `field`."""
    assert (excinfo.value.code, excinfo.value.status, excinfo.value.context) == (
        "invalid_payload",
        400,
        {"field": field},
    )
