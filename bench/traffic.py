"""Synthetic traffic: accounts with protected numbers, and calls as ordered event bodies.

Every call is `call.started`, 10-40 turns (`turn.started` / `turn.ended`, roles alternating, `at`
increasing on a plausible conversational timeline) and `call.ended`. The timeline is placed in the
recent past so no `at` is in the future and no live rule trips by accident (turns of 1-6 s, a few
words each, both sides talking), which is what a normal call looks like.

The caller speaks first. A call's minutes of event time are sent in seconds, so its start is already
more than `silent_s` old when its first turn arrives: with the agent first, the sweep found it silent
in the moment before the caller's turn and tripped `silent_listener` by accident.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from domain.times import format_ms

NUMBERS_PER_ACCOUNT = 25  # the guard plan's protected-number cap (docs/rules.md, Plans)


@dataclass(frozen=True)
class BenchAccount:
    account_id: str
    key: str
    numbers: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"account_id": self.account_id, "key": self.key, "numbers": list(self.numbers)}

    @staticmethod
    def from_json(raw: dict[str, Any]) -> BenchAccount:
        return BenchAccount(str(raw["account_id"]), str(raw["key"]), tuple(raw["numbers"]))


def protected_number(index: int) -> str:
    """A distinct, well-formed US number per index (San Francisco area code, exchanges 200-999)."""
    return f"+1415{2_000_000 + index:07d}"


def numbers_for(account_index: int, per_account: int = NUMBERS_PER_ACCOUNT) -> tuple[str, ...]:
    return tuple(protected_number(account_index * per_account + j) for j in range(per_account))


def caller_number(rng: random.Random) -> str:
    return f"+1646{rng.randrange(2_000_000, 9_999_999):07d}"


def call_started(call_id: str, to: str, caller: str, at_ms: int) -> dict[str, Any]:
    return {
        "type": "call.started",
        "call_id": call_id,
        "to": to,
        "from": caller,
        "at": format_ms(at_ms),
        "attrs": {"attestation": "A"},
    }


def call_ended(call_id: str, at_ms: int) -> dict[str, Any]:
    return {"type": "call.ended", "call_id": call_id, "at": format_ms(at_ms), "reason": "completed"}


def full_call(rng: random.Random, call_id: str, to: str, end_ms: int) -> list[dict[str, Any]]:
    """One call's bodies in order; the last `at` is `end_ms`."""
    turns = rng.randint(10, 40)
    lengths = [rng.randint(1_000, 6_000) for _ in range(turns)]
    gaps = [rng.randint(100, 600) for _ in range(turns)]
    start = end_ms - sum(lengths) - sum(gaps) - 500
    bodies = [call_started(call_id, to, caller_number(rng), start)]
    at = start + 300
    for turn in range(turns):
        role = "user" if turn % 2 == 0 else "agent"
        words = rng.randint(3, 25)
        bodies.append({"type": "turn.started", "call_id": call_id, "role": role, "turn": turn, "at": format_ms(at)})
        at += lengths[turn]
        bodies.append(
            {
                "type": "turn.ended",
                "call_id": call_id,
                "role": role,
                "turn": turn,
                "words": words,
                "chars": words * 5,
                "at": format_ms(at),
            }
        )
        at += gaps[turn]
    bodies.append(call_ended(call_id, end_ms))
    return bodies


def pick(accounts: list[BenchAccount], index: int) -> tuple[BenchAccount, str]:
    """Calls go round-robin over accounts, then over each account's numbers: n calls touch n numbers."""
    account = accounts[index % len(accounts)]
    return account, account.numbers[(index // len(accounts)) % len(account.numbers)]
