"""Lenient phone number input (docs/api.md, Conventions): E.164 out, or nothing, never a guess."""

from __future__ import annotations

import re

import pytest

from domain.phone import normalise

E164 = re.compile(r"^\+[1-9][0-9]{6,14}$")


@pytest.mark.parametrize(
    ("raw", "e164"),
    [("+1 (415) 555-2671", "+14155552671"), ("0044 20 7946 0123", "+442079460123"), ("14155552671", "+14155552671")],
)
def test_readable_numbers_come_back_in_e164(raw: str, e164: str) -> None:
    assert normalise(raw) == e164


@pytest.mark.parametrize("raw", ["+4900259", "+49 0 0259", "+490259"])
def test_a_number_too_short_for_e164_is_not_read(raw: str) -> None:
    # The parser keeps these as "possible" German numbers, but their E.164 form would have six digits.
    assert normalise(raw) is None


@pytest.mark.parametrize("raw", ["+4900259", "+12125550143", "+442079460123", "+61293744000", "+4930901820"])
def test_every_number_read_is_e164_shaped(raw: str) -> None:
    e164 = normalise(raw)
    assert e164 is None or E164.match(e164)
