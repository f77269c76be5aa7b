"""Plan limits (decisions.md section 4), from settings."""

from __future__ import annotations

from dataclasses import dataclass

from callscreen.settings import Settings


@dataclass(frozen=True)
class PlanLimits:
    numbers: int
    daily_starts: int
    live_monitor: bool


def plan_limits(settings: Settings, plan: str) -> PlanLimits:
    if plan == "guard":
        return PlanLimits(settings.guard_numbers, settings.guard_daily_starts, live_monitor=True)
    return PlanLimits(settings.watch_numbers, settings.watch_daily_starts, live_monitor=False)
