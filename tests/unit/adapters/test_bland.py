"""Bland's post-call webhook as event bodies (domain.adapters.bland).

The payload follows Bland's call object as docs.bland.ai/api-v1/get/calls-id documents it (the body its
post-call `webhook` receives: `call_id`, `to`, `from`, `inbound`, `started_at`, `end_at`, `price`,
`answered_by`, `variables`, `transcripts[]` of `id`/`created_at`/`text`/`user`, `summary`,
`recording_url`, `concatenated_transcript`); the live log event follows docs.bland.ai/api-v1/get/event-stream.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from domain.adapters import PARSERS, Ignored
from domain.events import CallEnded, CallStarted, TurnEnded
from domain.validation import InputError
from tests.unit.adapters.adapter_checks import assert_private, bodies, load, refused, validated

parse = PARSERS["bland"]
CALL_ID = "c1234567-89ab-cdef-0123-456789abcdef"
NUMBER = "+14155550100"
CALLER = "+16465550123"


def said(role: str, at: str, text: str, index: int) -> dict[str, object]:
    """A backfilled phrase, numbered `turn` by its place in `transcripts`."""
    return {"type": "turn.ended", "call_id": CALL_ID, "role": role, "at": at, "text": text, "turn": index}


EXPECTED: list[dict[str, Any]] = [
    {
        "type": "call.started",
        "call_id": CALL_ID,
        "from": CALLER,
        "to": NUMBER,
        "direction": "inbound",
        "at": "2025-06-02T09:30:00.000Z",
        "source": "bland",
        "attrs": {
            "geo": {"city": "NEW YORK", "region": "NY", "zip": "10001", "country": "US"},
            "answered_by": "human",
        },
    },
    said("agent", "2025-06-02T09:30:01.287Z", "Thanks for calling Acme Dental, how can I help?", 0),
    said("user", "2025-06-02T09:30:05.912Z", "Hi, this is PELICAN7, I need to move my cleaning.", 1),
    # Listed after the caller's "Friday." in the post, placed by its created_at but numbered by its place
    # (5); the robot and agent-action phrases (2, 3) are neither party, so their numbers are left unused.
    said("agent", "2025-06-02T09:30:08.134Z", "Sure, which day works for you?", 5),
    said("user", "2025-06-02T09:30:09.804Z", "Friday.", 4),
    {"type": "call.ended", "call_id": CALL_ID, "at": "2025-06-02T09:30:42.000Z", "cost": 0.063},
]


def test_one_post_is_the_start_the_turns_by_time_and_the_end() -> None:
    parsed = parse(load("bland_post_call"))
    assert parsed == EXPECTED
    events = validated(parsed)
    assert [type(e) for e in events] == [CallStarted, TurnEnded, TurnEnded, TurnEnded, TurnEnded, CallEnded]
    started, ended = events[0], events[-1]
    assert isinstance(started, CallStarted) and isinstance(ended, CallEnded)
    assert (started.number, started.caller, started.attrs["answered_by"]) == (NUMBER, CALLER, "human")
    assert ended.cost == 0.063


def test_the_turns_are_placed_by_time_whatever_order_they_came_in() -> None:
    payload = load("bland_post_call")
    random.Random(7).shuffle(payload["transcripts"])
    # Still placed by time, but numbered by the place each phrase took in the shuffled post: "Friday.",
    # the greeting, "Sure, ...", the agent action, the caller's request, the robot.
    assert [phrase["text"][:6] for phrase in payload["transcripts"]] == [
        "Friday",
        "Thanks",
        "Sure, ",
        "Looked",
        "Hi, th",
        "Press ",
    ]
    start, *turns, end = EXPECTED
    renumbered = [{**body, "turn": index} for body, index in zip(turns, [1, 4, 2, 0], strict=True)]
    assert parse(payload) == [start, *renumbered, end]


def test_an_outbound_call_keeps_blands_numbers_as_dialled() -> None:
    payload = load("bland_post_call")
    payload.update(inbound=False, to=CALLER, **{"from": NUMBER})
    [started, *_] = bodies(parse(payload))
    assert (started["from"], started["to"], started["direction"]) == (NUMBER, CALLER, "outbound")
    [event, *_] = validated([started])
    assert isinstance(event, CallStarted) and (event.number, event.caller) == (NUMBER, CALLER)


def test_what_bland_did_not_give_is_left_out() -> None:
    payload = load("bland_post_call")
    for key in ("inbound", "started_at", "variables", "answered_by", "transcripts", "end_at", "price"):
        del payload[key]
    assert parse(payload) == [
        {"type": "call.started", "call_id": CALL_ID, "from": CALLER, "to": NUMBER, "source": "bland"},
        {"type": "call.ended", "call_id": CALL_ID},
    ]


def test_a_live_log_event_is_ignored() -> None:
    assert parse(load("bland_event_stream")) == Ignored("not_a_call_event")


@pytest.mark.parametrize("missing", ["call_id", "from", "to"])
def test_a_payload_not_blands_shape_names_the_missing_field(missing: str) -> None:
    payload = load("bland_post_call")
    del payload[missing]
    with pytest.raises(InputError) as excinfo:
        parse(payload)
    refused(excinfo, missing)


def test_a_phrase_without_its_time_is_named() -> None:
    payload = load("bland_post_call")
    del payload["transcripts"][1]["created_at"]
    with pytest.raises(InputError) as excinfo:
        parse(payload)
    refused(excinfo, "transcripts[1].created_at")


def test_no_canary_word_reaches_a_body_but_a_turns_text() -> None:
    parsed = parse(load("bland_post_call"))
    assert_private(parsed)
    validated(parsed)
