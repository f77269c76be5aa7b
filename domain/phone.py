"""Phone numbers: lenient parsing to E.164 (docs/api.md), never a guess."""

from __future__ import annotations

import re
from dataclasses import dataclass

import phonenumbers
from phonenumbers import PhoneNumberType

# What the contract promises every number it answers looks like: `+`, a country code, 7 to 15 digits in all.
E164 = re.compile(r"^\+[1-9][0-9]{6,14}$")


@dataclass(frozen=True)
class Number:
    e164: str
    country: str
    national: str
    valid: bool
    premium: bool


def international(raw: str) -> tuple[str, bool] | None:
    """The text as an international number, and whether it said so itself (a leading `+`).

    `0044…` is the international dialling prefix; bare digits that start with a country code
    (`14155550142`) are read as international too, but only when they make a valid number.
    """
    text = raw.strip()
    if text.startswith("+"):
        return text, True
    if text.startswith("00"):
        return "+" + text[2:], False
    if text[:1].isdigit():
        return "+" + text, False
    return None


def parse_number(raw: object) -> Number | None:
    """The number in E.164 with its facts, or None when it cannot be read without guessing a region."""
    if not isinstance(raw, str):
        return None
    found = international(raw)
    if found is None:
        return None
    text, explicit = found
    try:
        parsed = phonenumbers.parse(text, None)
    except phonenumbers.NumberParseException:
        return None
    valid = phonenumbers.is_valid_number(parsed)
    if not phonenumbers.is_possible_number(parsed) or (not explicit and not valid):
        return None
    e164 = phonenumbers.format_number(parsed, phonenumbers.PhoneNumberFormat.E164)
    # The parser calls some digit strings after a country code "possible" that make no E.164 number
    # (`+4900259` would be `+490259`, six digits): those cannot be read.
    if not E164.match(e164):
        return None
    kind = phonenumbers.number_type(parsed)
    return Number(
        e164=e164,
        country=phonenumbers.region_code_for_number(parsed) or "",
        national=str(parsed.national_number),
        valid=valid,
        premium=kind in (PhoneNumberType.PREMIUM_RATE, PhoneNumberType.SHARED_COST),
    )


def normalise(raw: object) -> str | None:
    number = parse_number(raw)
    return number.e164 if number else None
