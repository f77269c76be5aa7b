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

import hashlib
import hmac
import random
from dataclasses import dataclass
from typing import Any

from domain.adapters import vapi
from domain.adapters.base import Ignored
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


def outbound_started(call_id: str, number: str, dialled: str, at_ms: int) -> dict[str, Any]:
    """An agent's outbound start from the protected `number`: the answer says whether it may dial."""
    return {**call_started(call_id, dialled, number, at_ms), "direction": "outbound"}


def call_ended(call_id: str, at_ms: int) -> dict[str, Any]:
    return {"type": "call.ended", "call_id": call_id, "at": format_ms(at_ms), "reason": "completed"}


@dataclass(frozen=True)
class Turn:
    """One turn of a call's timeline: its place, who speaks, when it starts and ends, and its words."""

    index: int
    role: str  # "user" or "agent"
    start_ms: int
    end_ms: int
    words: int


@dataclass(frozen=True)
class Timeline:
    caller: str
    start_ms: int
    turns: tuple[Turn, ...]
    end_ms: int


def timeline(rng: random.Random, end_ms: int) -> Timeline:
    """One call's shape, the caller first: 10-40 turns of 1-6 s with gaps of 0.1-0.6 s; it ends at `end_ms`."""
    count = rng.randint(10, 40)
    lengths = [rng.randint(1_000, 6_000) for _ in range(count)]
    gaps = [rng.randint(100, 600) for _ in range(count)]
    start = end_ms - sum(lengths) - sum(gaps) - 500
    caller = caller_number(rng)
    turns = []
    at = start + 300
    for index in range(count):
        role = "user" if index % 2 == 0 else "agent"
        turns.append(Turn(index, role, at, at + lengths[index], rng.randint(3, 25)))
        at += lengths[index] + gaps[index]
    return Timeline(caller, start, tuple(turns), end_ms)


def full_call(rng: random.Random, call_id: str, to: str, end_ms: int) -> list[dict[str, Any]]:
    """One call's bodies in order; the last `at` is `end_ms`."""
    call = timeline(rng, end_ms)
    bodies = [call_started(call_id, to, call.caller, call.start_ms)]
    for turn in call.turns:
        common = {"call_id": call_id, "role": turn.role, "turn": turn.index}
        bodies.append({"type": "turn.started", **common, "at": format_ms(turn.start_ms)})
        bodies.append(
            {"type": "turn.ended", **common, "words": turn.words, "chars": turn.words * 5, "at": format_ms(turn.end_ms)}
        )
    bodies.append(call_ended(call_id, end_ms))
    return bodies


def pick(accounts: list[BenchAccount], index: int) -> tuple[BenchAccount, str]:
    """Calls go round-robin over accounts, then over each account's numbers: n calls touch n numbers."""
    account = accounts[index % len(accounts)]
    return account, account.numbers[(index // len(accounts)) % len(account.numbers)]


# Vapi's side of the adapter bench (bench/adapters.py): its server messages as `POST /v1/ingest/vapi/<token>`
# takes them, shaped as tests/unit/adapters/payloads/ has them (Vapi's `ServerMessage`), and its signature.
VAPI_ORG = "5b2f1c9e-8d3a-4f6b-a1e2-9c7d3b4a5e60"


def _vapi_call(call_id: str, caller: str, status: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "orgId": VAPI_ORG,
        "type": "inboundPhoneCall",
        "status": status,
        "phoneCallProvider": "twilio",
        "phoneCallProviderId": "CA" + call_id.replace("-", "")[-32:].rjust(32, "0"),
        "phoneCallTransport": "pstn",
        "customer": {"number": caller},
    }


def vapi_status_update(call_id: str, to: str, caller: str, at_ms: int) -> dict[str, Any]:
    """The `status-update` Vapi posts when an inbound call goes `in-progress`: the adapter's `call.started`."""
    return {
        "message": {
            "timestamp": at_ms,
            "type": "status-update",
            "status": "in-progress",
            "call": _vapi_call(call_id, caller, "in-progress"),
            "phoneNumber": {"provider": "twilio", "number": to, "name": "Front desk"},
            "customer": {"number": caller},
            "artifact": {"messages": [], "messagesOpenAIFormatted": []},
        }
    }


VAPI_ROLES = {"user": "user", "agent": "assistant"}


def vapi_speech_update(call_id: str, to: str, caller: str, turn: Turn, started: bool) -> dict[str, Any]:
    """The `speech-update` Vapi posts as a side starts (`started`) or stops talking: the adapter's `turn.started`
    or `turn.ended`, numbered by Vapi's `turn`. Its artifact is left empty (Vapi's carries the transcript so
    far), so its body is the same size at every turn."""
    return {
        "message": {
            "timestamp": turn.start_ms if started else turn.end_ms,
            "type": "speech-update",
            "status": "started" if started else "stopped",
            "role": VAPI_ROLES[turn.role],
            "turn": turn.index,
            "call": _vapi_call(call_id, caller, "in-progress"),
            "phoneNumber": {"provider": "twilio", "number": to},
            "customer": {"number": caller},
            "artifact": {"messages": [], "messagesOpenAIFormatted": []},
        }
    }


def vapi_end_of_call(call_id: str, to: str, caller: str, at_ms: int) -> dict[str, Any]:
    """Vapi's `end-of-call-report` (no transcript or costs): the adapter's `call.ended`."""
    return {
        "message": {
            "timestamp": at_ms,
            "type": "end-of-call-report",
            "endedReason": "customer-ended-call",
            "endedAt": format_ms(at_ms),
            "call": _vapi_call(call_id, caller, "ended"),
            "phoneNumber": {"provider": "twilio", "number": to},
            "customer": {"number": caller},
        }
    }


def vapi_call(rng: random.Random, call_id: str, to: str, end_ms: int) -> list[dict[str, Any]]:
    """One call as Vapi's messages, on the timeline `full_call` gives its bodies: `status-update` in progress,
    a `speech-update` started and stopped for each turn, and the `end-of-call-report`."""
    call = timeline(rng, end_ms)
    messages = [vapi_status_update(call_id, to, call.caller, call.start_ms)]
    for turn in call.turns:
        messages.append(vapi_speech_update(call_id, to, call.caller, turn, started=True))
        messages.append(vapi_speech_update(call_id, to, call.caller, turn, started=False))
    messages.append(vapi_end_of_call(call_id, to, call.caller, end_ms))
    return messages


def vapi_headers(secret: str, body: bytes, now_s: float) -> bytes:
    """Vapi's HMAC credential as raw header lines: `x-signature` is hex HMAC-SHA256 of `<x-timestamp>.<body>`."""
    timestamp = str(int(now_s)).encode()
    signature = hmac.new(secret.encode(), timestamp + b"." + body, hashlib.sha256).hexdigest().encode()
    return b"Content-Type: application/json\r\nx-timestamp: " + timestamp + b"\r\nx-signature: " + signature + b"\r\n"


def native_body(message: dict[str, Any]) -> dict[str, Any]:
    """The body the Vapi adapter makes of `message`, as a platform posting `POST /v1/events` itself would send
    it (its `source` left to the default): the same event by the other route."""
    parsed = vapi.parse(message)
    if isinstance(parsed, Ignored) or len(parsed) != 1:
        raise ValueError(f"the Vapi adapter made no one event of a {message['message']['type']}")
    return {name: value for name, value in parsed[0].items() if name != "source"}
