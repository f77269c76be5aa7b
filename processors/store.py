"""Key-value stores behind one small interface: RocksDB (rocksdict) in service, a dict in unit tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import orjson
from rocksdict import Options, Rdict


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
    """JSON values in a RocksDB database, with small memtables so it fits in a worker's memory budget."""

    def __init__(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        # RocksDB's 64 MB memtables would hold most of a large view in memory before the first flush.
        options.set_write_buffer_size(4 * 1024 * 1024)
        options.set_max_write_buffer_number(2)
        self.db = Rdict(str(path), options)

    def get(self, key: str) -> Any:
        raw = self.db.get(key.encode())
        return None if raw is None else orjson.loads(raw)

    def put(self, key: str, value: Any) -> None:
        self.db[key.encode()] = orjson.dumps(value)

    def close(self) -> None:
        self.db.close()
