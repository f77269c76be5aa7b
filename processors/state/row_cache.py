"""Table rows read or written lately, with the struct each decodes to, within a bound on their bytes.

Every event of a call reads the call's row and writes it back: about 6 KB, fetched from RocksDB and
decoded each time (docs/decisions/0017-call-rows-kept-decoded.md). A row kept here is neither; a
row that is not a struct (an index, a due time) is still decoded, but not fetched. The struct a fold
wrote is kept as it was written, not decoded again, so in `check` mode (the test suite's) every struct
kept is decoded again from its row and compared, type for type: a fold must see the same values from
here as from RocksDB after a restart.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import msgspec

# A table's name, the partition and the key.
Slot = tuple[str, int, bytes]


class RowMismatch(AssertionError):
    """A kept struct differs from its row decoded again: a fold would see other values than after a restart."""


class RowCache:
    def __init__(self, max_bytes: int, check: bool = False) -> None:
        self.max_bytes = max_bytes
        self.check = check
        self.held = 0
        # Each slot's row and, when it decodes to one, its struct; the least recently used first.
        self._rows: OrderedDict[Slot, tuple[bytes, msgspec.Struct | None]] = OrderedDict()

    def row(self, slot: Slot) -> tuple[bytes, msgspec.Struct | None] | None:
        """The row kept for `slot` and its struct (None when it is not one), or None when nothing is kept."""
        kept = self._rows.get(slot)
        if kept is not None:
            self._rows.move_to_end(slot)
        return kept

    def put(self, slot: Slot, raw: bytes, value: Any) -> None:
        """Keep the row `raw` and `value`, what it decodes to (or the value it was encoded from), if a struct."""
        self.drop(slot)
        struct = value if isinstance(value, msgspec.Struct) else None
        if struct is not None and self.check:
            decoded = msgspec.json.decode(raw, type=type(struct))
            if not same(struct, decoded):
                raise RowMismatch(f"{slot[0]} row kept as {struct!r}, decoded as {decoded!r}")
        self._rows[slot] = (raw, struct)
        self.held += len(raw)
        while self.held > self.max_bytes:
            _, (evicted, _) = self._rows.popitem(last=False)
            self.held -= len(evicted)

    def drop(self, slot: Slot) -> None:
        kept = self._rows.pop(slot, None)
        if kept is not None:
            self.held -= len(kept[0])

    def drop_table(self, name: str) -> None:
        for slot in [slot for slot in self._rows if slot[0] == name]:
            self.drop(slot)


def fits(value: msgspec.Struct | None, kind: Any) -> bool:
    """Whether a read as `kind` (a struct type or a union of them) would decode the row as `value`'s type."""
    if value is None:
        return False
    try:
        return isinstance(value, kind)
    except TypeError:
        # `Any` and other kinds that are not classes: such a row is decoded every time.
        return False


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same type all the way down (3 and 3.0, or a tuple and a list, are not the same)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, msgspec.Struct):
        return all(same(getattr(a, field), getattr(b, field)) for field in a.__struct_fields__)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(value, b[key]) for key, value in a.items())
    return bool(a == b)
