"""The feature view's store in RocksDB: JSON values under string keys, within the worker's budget.

It keeps the `domain.store.Store` contract (tests/unit/test_store.py runs it on both stores).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from processors.rocks import RocksBudget


class RocksStore:
    def __init__(self, path: Path, budget: RocksBudget) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.db = budget.open(path)

    def get(self, key: str) -> Any:
        raw = self.db.get(key.encode())
        return None if raw is None else msgspec.json.decode(raw)

    def put(self, key: str, value: Any) -> None:
        self.db[key.encode()] = msgspec.json.encode(value)

    def close(self) -> None:
        self.db.close()
