"""Each account's events awaiting the worker's answer at this edge: at most a few at once, the rest wait
their turn at the edge, in the order they came (decision 0037).

The worker folds each partition in log order, so whatever one account has appended and not yet had
answered is ahead of every other account's next event. A burst within an account's rate limit (its 1,200
events at once) would put every other account's answer behind all of it; capped here, the burst waits
behind its own events and another account's event finds at most a few of its in the log ahead of it.
"""

from __future__ import annotations

import asyncio
from collections import deque

from ingest.shares import Shares


class TurnRefused(Exception):
    """No turn for this event: the account's queue is full (`waited` False), or the wait ran out."""

    def __init__(self, waited: bool) -> None:
        super().__init__("waited out" if waited else "queue full")
        self.waited = waited


class EventTurns:
    """`per_account` turns an account; past them up to `waiting_per_account` events wait, first come first
    served. A turn given back goes straight to the account's next waiter, so a waiter is never overtaken."""

    def __init__(self, per_account: int, waiting_per_account: int) -> None:
        self.turns = Shares(per_account)
        self.waiting_per_account = waiting_per_account
        # Only accounts with a waiter: an account has waiters only while all its turns are taken.
        self._waiting: dict[str, deque[asyncio.Future[None]]] = {}

    async def take(self, account_id: str, wait_s: float) -> None:
        """A turn for `account_id`, within `wait_s`; else `TurnRefused`. Give it back with `give_back`."""
        queue = self._waiting.get(account_id)
        if queue is None and self.turns.take(account_id):
            return
        if queue is None:
            queue = self._waiting[account_id] = deque()
        if len(queue) >= self.waiting_per_account:
            raise TurnRefused(waited=False)
        waiter = asyncio.get_running_loop().create_future()
        queue.append(waiter)
        try:
            async with asyncio.timeout(wait_s):
                await waiter
        except BaseException as exc:
            if waiter.done() and not waiter.cancelled():
                # Handed a turn just as the wait ended: it is this event's, so it goes on to the next.
                self.give_back(account_id)
            else:
                self._leave(account_id, waiter)
            if isinstance(exc, TimeoutError):
                raise TurnRefused(waited=True) from None
            raise

    def give_back(self, account_id: str) -> None:
        queue = self._waiting.get(account_id)
        while queue:
            waiter = queue.popleft()
            if not waiter.done():
                waiter.set_result(None)
                if not queue:
                    del self._waiting[account_id]
                return
        self._waiting.pop(account_id, None)
        self.turns.give_back(account_id)

    def _leave(self, account_id: str, waiter: asyncio.Future[None]) -> None:
        waiter.cancel()
        queue = self._waiting.get(account_id)
        if queue is None:
            return
        if waiter in queue:
            queue.remove(waiter)
        if not queue:
            del self._waiting[account_id]

    def waiting(self, account_id: str) -> int:
        return len(self._waiting.get(account_id, ()))

    def in_turn(self, account_id: str) -> int:
        return self.turns.in_flight(account_id)
