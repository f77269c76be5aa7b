"""The key-value store the feature view folds into: JSON-shaped values under string keys.

`MemoryStore` is the plain-data one (the scenario harness, unit tests); the worker keeps the same
view in RocksDB (`processors.state.rocks`). One contract suite runs against both (tests/unit/test_store.py).
"""

from __future__ import annotations

from typing import Any, Protocol

import msgspec

# Every value a fold writes stays under this, well inside the broker's 1 MiB message limit: the caps of
# domain/validation.py and the bounded windows of the folds keep it there (tests/unit/test_bounds.py).
MAX_VALUE_BYTES = 512 * 1024


class Store(Protocol):
    def get(self, key: str) -> Any:
        """The value under `key`, or None. It may be the store's own: a caller changes it only to put it back,
        and leaves a value it put unchanged."""
        ...

    def put(self, key: str, value: Any) -> None: ...

    def delete(self, key: str) -> None:
        """`key` gone: a get gives None."""
        ...

    def close(self) -> None: ...


class MemoryStore:
    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def get(self, key: str) -> Any:
        raw = self.data.get(key)
        return None if raw is None else msgspec.json.decode(raw)

    def put(self, key: str, value: Any) -> None:
        self.data[key] = msgspec.json.encode(value)

    def delete(self, key: str) -> None:
        self.data.pop(key, None)

    def close(self) -> None:
        self.data.clear()
