"""Phone numbers: lenient parsing to E.164, never a guess."""

from __future__ import annotations

from dataclasses import dataclass

import phonenumbers
from phonenumbers import PhoneNumberType


@dataclass(frozen=True)
class Number:
    e164: str
    country: str
    national: str
    valid: bool
    premium: bool


def parse_number(raw: object) -> Number | None:
    """The number in E.164 with its facts, or None when it cannot be read without guessing a region."""
    if not isinstance(raw, str) or not raw.strip().startswith("+"):
        return None
    try:
        parsed = phonenumbers.parse(raw, None)
    except phonenumbers.NumberParseException:
        return None
    if not phonenumbers.is_possible_number(parsed):
        return None
    kind = phonenumbers.number_type(parsed)
    return Number(
        e164=phonenumbers.format_number(parsed, phonenumbers.PhoneNumberFormat.E164),
        country=phonenumbers.region_code_for_number(parsed) or "",
        national=str(parsed.national_number),
        valid=phonenumbers.is_valid_number(parsed),
        premium=kind in (PhoneNumberType.PREMIUM_RATE, PhoneNumberType.SHARED_COST),
    )


def normalise(raw: object) -> str | None:
    number = parse_number(raw)
    return number.e164 if number else None
