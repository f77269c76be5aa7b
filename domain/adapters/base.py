"""What every platform parser shares: its result types and the small readers it checks a payload with.

A parser turns one platform payload into the bodies `POST /v1/events` takes (docs/api.md, Post an event),
in the order they are appended, or says the payload maps to no event. A payload that is not the
platform's shape raises `InputError("invalid_payload", field=...)` naming the first missing field.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from domain.times import format_ms, parse_ms
from domain.validation import InputError

Body = dict[str, Any]
NOT_A_CALL_EVENT = "not_a_call_event"
SECOND_MS = 1000


@dataclass(frozen=True)
class Ignored:
    """A payload the platform sent that maps to no event: answered 200 `{"ignored": true, "why": ...}`."""

    why: str = NOT_A_CALL_EVENT


# The bodies in append order (start, turns by time, end), or why there are none.
Parsed = list[Body] | Ignored
Parser = Callable[[Any], Parsed]
IGNORED = Ignored()


def pick(choices: Mapping[str, str], value: Any) -> str | None:
    """`choices[value]` for a string the platform sent, else None (a value of any other type included)."""
    return choices.get(value) if isinstance(value, str) else None


def invalid(field: str) -> InputError:
    """The refusal for a payload that is not the platform's shape, naming the field that is missing."""
    return InputError("invalid_payload", field=field)


def table(value: Any, field: str) -> Mapping[str, Any]:
    """`value` as an object, or the refusal naming `field`."""
    if not isinstance(value, Mapping):
        raise invalid(field)
    return value


def member(parent: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    """The object at `parent[key]`; `path` names it in a refusal."""
    return table(parent.get(key), path)


def optional_table(parent: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any] | None:
    """The object at `parent[key]` when there is one (absent or null is none, anything else is refused)."""
    value = parent.get(key)
    return None if value is None else table(value, path)


def text(parent: Mapping[str, Any], key: str, path: str) -> str:
    """The non-empty string at `parent[key]`, or the refusal naming `path`."""
    value = parent.get(key)
    if not isinstance(value, str) or not value:
        raise invalid(path)
    return value


def optional_text(parent: Mapping[str, Any] | None, key: str) -> str | None:
    """The non-empty string at `parent[key]`, else None: a platform leaves optional strings out or empty."""
    if parent is None:
        return None
    value = parent.get(key)
    return value if isinstance(value, str) and value else None


def number(value: Any, path: str) -> float:
    """A finite JSON number (never a boolean), or the refusal naming `path`."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise invalid(path)
    return float(value)


def optional_number(parent: Mapping[str, Any] | None, key: str, path: str) -> float | None:
    if parent is None or parent.get(key) is None:
        return None
    return number(parent[key], path)


def whole(value: Any, path: str) -> int:
    """A protobuf-JSON 64-bit integer: a string of digits (or a plain JSON integer), or the refusal."""
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise invalid(path)


# The last millisecond of the year 9999: past it no ISO 8601 time can be written.
LAST_MS = 253_402_300_799_999


def iso(epoch_ms: int, path: str) -> str:
    """The contract's time shape for epoch milliseconds; a time before 1970 or past the year 9999 is the
    refusal naming `path`, the field it came from."""
    if not 0 <= epoch_ms <= LAST_MS:
        raise invalid(path)
    return format_ms(epoch_ms)


def ms_of(value: Any, path: str) -> int:
    """Epoch milliseconds of an ISO 8601 string with a timezone, or the refusal naming `path`."""
    at = parse_ms(value)
    if at is None:
        raise invalid(path)
    return at


def offset_ms(start_ms: int, seconds: Any, path: str) -> int:
    """`seconds` (a platform's time into the call) after `start_ms`, in whole milliseconds."""
    return start_ms + round(number(seconds, path) * SECOND_MS)


def compact(body: Mapping[str, Any]) -> Body:
    """The body without the fields the platform did not give: they are left out, never guessed."""
    return {key: value for key, value in body.items() if value is not None}


def in_time_order(turns: Iterable[tuple[int, Body]]) -> list[Body]:
    """Backfilled turn bodies by their time; the sort is stable, so a start stays before its own end."""
    return [body for _, body in sorted(turns, key=lambda pair: pair[0])]


# One transcript entry (its path named in refusals) as its timed turn bodies, none for an entry nobody spoke.
EntryReader = Callable[[Mapping[str, Any], str], Iterable[tuple[int, Body]]]


def backfill(entries: Any, path: str, read: EntryReader) -> list[Body]:
    """A post-call transcript's entries as turn bodies by their time. Each is numbered `turn` by its place
    in the transcript, so a platform's retry after a half-appended post counts no turn twice."""
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise invalid(path)
    timed: list[tuple[int, Body]] = []
    for index, item in enumerate(entries):
        entry = f"{path}[{index}]"
        timed += [(at, {**body, "turn": index}) for at, body in read(table(item, entry), entry)]
    return in_time_order(timed)


def phone_roles(direction: str, other: str, own: str) -> tuple[str, str]:
    """`(from, to)` for a call between the other party and the account's own number: inbound, the other
    party dialled; outbound, the account's number did (docs/api.md, call.started `direction`)."""
    return (other, own) if direction == "inbound" else (own, other)
