"""Key-value stores behind one small interface: RocksDB (rocksdict) in service, a dict in unit tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import orjson

from processors.rocks import RocksBudget


class Store(Protocol):
    def get(self, key: str) -> Any: ...

    def put(self, key: str, value: Any) -> None: ...

    def close(self) -> None: ...


class MemoryStore:
    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def get(self, key: str) -> Any:
        raw = self.data.get(key)
        return None if raw is None else orjson.loads(raw)

    def put(self, key: str, value: Any) -> None:
        self.data[key] = orjson.dumps(value)

    def close(self) -> None:
        self.data.clear()


class RocksStore:
    """JSON values in a RocksDB database opened within the worker's RocksDB memory budget."""

    def __init__(self, path: Path, budget: RocksBudget) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.db = budget.open(path)

    def get(self, key: str) -> Any:
        raw = self.db.get(key.encode())
        return None if raw is None else orjson.loads(raw)

    def put(self, key: str, value: Any) -> None:
        self.db[key.encode()] = orjson.dumps(value)

    def close(self) -> None:
        self.db.close()
