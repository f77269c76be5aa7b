"""Credentials: a prefix, then exactly 32 base62 characters (docs/api.md, Credentials)."""

from __future__ import annotations

import pytest

from domain import ids


def test_a_new_key_is_well_formed_with_its_own_prefix_only() -> None:
    key = ids.new_key("full")
    assert ids.is_well_formed(key, ids.FULL_KEY_PREFIX)
    assert not ids.is_well_formed(key, ids.READ_KEY_PREFIX)


@pytest.mark.parametrize(
    "credential",
    [
        "cs_live_" + "a" * 31,
        "cs_live_" + "a" * 33,
        "cs_live_" + "a" * 31 + "-",
        "cs_live_" + "a" * 31 + "\u00e9",
        "cs_live_" + "a" * 31 + "\n",
        "cs_read_" + "a" * 32,
        "a" * 40,
        "",
    ],
    ids=["short", "long", "dash", "non-ascii", "newline", "other prefix", "no prefix", "empty"],
)
def test_anything_else_is_not(credential: str) -> None:
    assert not ids.is_well_formed(credential, ids.FULL_KEY_PREFIX)
