"""The documents written from the code are up to date (`make docs` writes them)."""

from __future__ import annotations

from infra.docs import ARCHITECTURE, RULES, rules_page, with_layers


def test_the_rules_page_is_the_rules() -> None:
    assert RULES.read_text() == rules_page(), "run `make docs`"


def test_the_layers_picture_is_the_imports() -> None:
    text = ARCHITECTURE.read_text()
    assert text == with_layers(text), "run `make docs`"
