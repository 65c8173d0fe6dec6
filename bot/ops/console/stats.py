"""The overview's messages-per-hour chart, laid out for the template's SVG, and byte sizes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable

#: The chart's drawing area, in SVG user units (the CSS scales it to the page's width).
CHART_W, CHART_H, CHART_LEFT, CHART_BOTTOM = 720, 180, 36, 22


def size(n: float) -> str:
    """Show a byte count: 1.2 MB."""
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


@dataclass(frozen=True)
class Bar:
    """One hour of the chart: where its bar goes and what it says."""

    x: float
    y: float
    width: float
    height: float
    count: int
    hour: str  # "14:00", UTC
    label: bool  # whether the hour is written under the bar


@dataclass(frozen=True)
class Chart:
    """The messages-per-hour chart, ready for the template's SVG."""

    bars: list[Bar]
    top: int  # the value the y axis goes up to
    width: int = CHART_W
    height: int = CHART_H
    left: int = CHART_LEFT
    base: int = CHART_H - CHART_BOTTOM

    @property
    def half(self) -> str:
        """Return the label of the middle grid line."""
        return f"{self.top / 2:g}"

    @property
    def mid(self) -> float:
        """Return the height of the middle grid line."""
        return (self.base + 8) / 2


def hourly_chart(points: Iterable[tuple[float, int]]) -> Chart:
    """Lay out one bar per hour, oldest left; the axis tops at a round number."""
    points = list(points)
    peak = max((count for _, count in points), default=0)
    top = next(step for step in (5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10**4, 10**5, 10**6, 10**9)
               if step >= peak)
    base = CHART_H - CHART_BOTTOM
    room = base - 8
    slot = (CHART_W - CHART_LEFT) / max(len(points), 1)
    bars = []
    for i, (start, count) in enumerate(points):
        height = room * count / top
        hour = datetime.fromtimestamp(start, timezone.utc).strftime("%H:00")
        bars.append(Bar(x=round(CHART_LEFT + i * slot + 2, 1), y=round(base - height, 1), width=round(slot - 4, 1),
                        height=round(height, 1), count=count, hour=hour, label=i % 3 == 0))
    return Chart(bars, top)
