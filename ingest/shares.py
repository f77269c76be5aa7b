"""Counted shares of a shared resource, one count per key (an account, a host)."""

from __future__ import annotations


class Shares:
    """How many each key has in flight (forwards, events awaiting answers), each key at most `limit`.

    Taking a slot never waits: a full key refuses. A key with nothing in flight is forgotten, so the map
    holds only keys with something out.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._held: dict[str, int] = {}

    def take(self, key: str) -> bool:
        held = self._held.get(key, 0)
        if held >= self.limit:
            return False
        self._held[key] = held + 1
        return True

    def give_back(self, key: str) -> None:
        held = self._held[key] - 1
        if held:
            self._held[key] = held
        else:
            del self._held[key]

    def in_flight(self, key: str) -> int:
        return self._held.get(key, 0)

    def __len__(self) -> int:
        return len(self._held)
