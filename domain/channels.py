"""Alert channels beyond the webhook (docs/api.md, Alert channels): email, text and voice destinations,
each channel with a severity floor, and which of them an alert reaches.

Plain data and pure rules; the alerting role sends, and the accounts topic keeps each account's choice
(`channel.set` records, domain.accounts).
"""

from __future__ import annotations

from dataclasses import dataclass

from domain.alerts import SEVERITY_RANK

CHANNELS = ("email", "text", "voice")
# A channel a plan may turn on; a downgrade turns off the ones the new plan lacks.
PLAN_CHANNELS = {"watch": frozenset({"email"}), "guard": frozenset(CHANNELS)}
DEFAULT_FLOOR = {"email": "threat", "text": "critical", "voice": "critical"}
MAX_DESTINATIONS = 5
# Why a destination got no message: below its floor, past the hourly cap, or no SMTP or carrier settings.
BELOW_FLOOR = "floor"
OVER_RATE = "rate"
UNCONFIGURED = "unavailable"


@dataclass(frozen=True)
class Channel:
    """One channel's destinations (addresses or E.164 numbers) and the lowest severity it receives."""

    to: tuple[str, ...]
    floor: str


def reaches(floor: str, severity: str) -> bool:
    """Whether an alert of `severity` goes to a channel with `floor` (info < threat < critical)."""
    return SEVERITY_RANK[severity] >= SEVERITY_RANK[floor]


def allowed(plan: str, channel: str) -> bool:
    return channel in PLAN_CHANNELS.get(plan, frozenset())


def on_plan(channels: dict[str, Channel], plan: str) -> dict[str, Channel]:
    """The channels an account keeps on `plan`."""
    return {name: channel for name, channel in channels.items() if allowed(plan, name)}


@dataclass(frozen=True)
class Send:
    """One message to send: an alert to one destination of one channel."""

    channel: str
    to: str


@dataclass(frozen=True)
class Skip:
    """A destination that gets no message, and why; recorded like a send, so nothing vanishes."""

    channel: str
    to: str
    reason: str


def fan_out(channels: dict[str, Channel], severity: str, available: frozenset[str]) -> list[Send | Skip]:
    """Every destination of every channel for an alert of `severity`, in a stable order: a send, or a
    skip when the alert is below the channel's floor or the deployment lacks the channel's settings."""
    out: list[Send | Skip] = []
    for name in CHANNELS:
        channel = channels.get(name)
        if channel is None:
            continue
        for to in channel.to:
            if not reaches(channel.floor, severity):
                out.append(Skip(name, to, BELOW_FLOOR))
            elif name not in available:
                out.append(Skip(name, to, UNCONFIGURED))
            else:
                out.append(Send(name, to))
    return out
