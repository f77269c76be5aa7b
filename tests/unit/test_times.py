"""The one time shape: ISO 8601, UTC, milliseconds, four-digit years."""

from __future__ import annotations

import pytest

from domain.times import format_ms, parse_ms


@pytest.mark.parametrize(
    "text",
    ["2026-11-23T09:05:45.829Z", "1969-12-31T23:59:59.999Z", "0515-01-05T11:17:16.693Z", "9999-12-31T23:59:59.999Z"],
)
def test_round_trip(text: str) -> None:
    epoch_ms = parse_ms(text)
    assert epoch_ms is not None
    assert format_ms(epoch_ms) == text


def test_offsets_are_normalised_to_utc() -> None:
    assert format_ms(parse_ms("2026-11-23T10:05:45.8+01:00") or 0) == "2026-11-23T09:05:45.800Z"


@pytest.mark.parametrize("text", ["2026-11-23T09:05:45", "yesterday", "", 1700000000])
def test_refuses_what_is_not_a_zoned_timestamp(text: object) -> None:
    assert parse_ms(text) is None
