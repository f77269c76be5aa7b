"""The dashboard's charts, as SVG geometry drawn by the templates (no script, no chart library): the
overview's calls and rejects per hour over the last day, and a shadow run's daily reject rates under
each policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from domain.rules import HOUR_MS
from domain.times import format_ms, parse_ms

WIDTH = 720
HEIGHT = 180
LEFT = 36
BOTTOM = 24
TOP = 8
BAR_MAX = 40


@dataclass(frozen=True)
class Bar:
    x: float
    width: float
    calls_y: float
    calls_height: float
    rejects_y: float
    rejects_height: float
    label: str
    calls: int
    rejects: int


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    bars: list[Bar]
    peak: int
    ticks: list[tuple[float, str]]
    total_calls: int
    total_rejects: int


def hourly_chart(calls: list[dict[str, Any]], now: int, hours: int) -> Chart:
    """Bars for each of the last `hours` whole hours up to now, the current hour last."""
    first = (now // HOUR_MS - hours + 1) * HOUR_MS
    counts = [[0, 0] for _ in range(hours)]
    for call in calls:
        at = parse_ms(call.get("at"))
        if at is None or at < first:
            continue
        slot = min((at - first) // HOUR_MS, hours - 1)
        counts[slot][0] += 1
        counts[slot][1] += call.get("action") == "reject"
    peak = max([c for c, _ in counts] + [1])
    plot_w, plot_h = WIDTH - LEFT, HEIGHT - BOTTOM - TOP
    step = plot_w / hours
    bars = []
    for i, (n, rejected) in enumerate(counts):
        calls_h = plot_h * n / peak
        rejects_h = plot_h * rejected / peak
        hour = format_ms(first + i * HOUR_MS)[11:13]
        bars.append(
            Bar(
                x=round(LEFT + i * step + 2, 1),
                width=round(step - 4, 1),
                calls_y=round(TOP + plot_h - calls_h, 1),
                calls_height=round(calls_h, 1),
                rejects_y=round(TOP + plot_h - rejects_h, 1),
                rejects_height=round(rejects_h, 1),
                label=f"{hour}:00",
                calls=n,
                rejects=rejected,
            )
        )
    values = sorted({0, peak // 2, peak}) if peak >= 4 else [0, peak]
    ticks = [(round(TOP + plot_h - plot_h * v / peak, 1), str(v)) for v in values]
    return Chart(WIDTH, HEIGHT, bars, peak, ticks, sum(c for c, _ in counts), sum(r for _, r in counts))


@dataclass(frozen=True)
class DayBars:
    """One day of a shadow run: the share of its calls each policy rejected, side by side."""

    x: float
    width: float
    live_y: float
    live_height: float
    shadow_y: float
    shadow_height: float
    label: str
    calls: int
    live: int
    shadow: int


@dataclass(frozen=True)
class RateChart:
    width: int
    height: int
    days: list[DayBars]
    ticks: list[tuple[float, str]]


def daily_chart(daily: list[dict[str, Any]]) -> RateChart:
    """A shadow run's daily reject rates, live beside shadow, from 0 to the highest rate (at least 10%)."""
    rates = [(d["live"]["reject"] / d["calls"], d["shadow"]["reject"] / d["calls"]) for d in daily if d["calls"]]
    peak = max([0.1, *(max(pair) for pair in rates)])
    plot_w, plot_h = WIDTH - LEFT, HEIGHT - BOTTOM - TOP
    step = plot_w / max(1, len(daily))
    days = []
    for i, day in enumerate(daily):
        calls = max(1, day["calls"])
        live_h = plot_h * day["live"]["reject"] / calls / peak
        shadow_h = plot_h * day["shadow"]["reject"] / calls / peak
        # A short run has few days: its bars keep a bar's width rather than fill the plot.
        half = min((step - 6) / 2, BAR_MAX)
        days.append(
            DayBars(
                x=round(LEFT + i * step + 2, 1),
                width=round(half, 1),
                live_y=round(TOP + plot_h - live_h, 1),
                live_height=round(live_h, 1),
                shadow_y=round(TOP + plot_h - shadow_h, 1),
                shadow_height=round(shadow_h, 1),
                label=str(day["date"])[5:],
                calls=day["calls"],
                live=day["live"]["reject"],
                shadow=day["shadow"]["reject"],
            )
        )
    ticks = [(round(TOP + plot_h - plot_h * v / peak, 1), f"{round(v * 100)}%") for v in (0.0, peak / 2, peak)]
    return RateChart(WIDTH, HEIGHT, days, ticks)
