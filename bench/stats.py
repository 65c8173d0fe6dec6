"""Figures the benchmarks share."""

from __future__ import annotations

import math


def pct(values: list[float], q: float) -> float:
    """Return the q-th percentile (0-100) by nearest rank: the smallest value with at least
    q % of the values at or below it."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]
