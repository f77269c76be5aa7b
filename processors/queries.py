"""Read-only questions the edge asks the workers, answered from the tables."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from callscreen.settings import Settings
from processors.features import FeatureView


def answer(
    record: dict[str, Any], view: FeatureView, calls: Mapping[Any, Any], settings: Settings
) -> tuple[int, dict[str, Any]]:
    kind = record.get("q")
    account = str(record.get("account_id"))
    if kind == "account.usage":
        return 200, {
            "numbers": len(view.numbers(account)),
            "scored_today": view.scored_on(account, int(record["day"])),
        }
    return 400, {"error": "unknown_query"}
