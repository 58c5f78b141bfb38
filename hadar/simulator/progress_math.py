"""Piecewise-linear progress of concurrent runs of one job within a round (pure functions)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Run:
    """A run starting ``start`` seconds into the round at ``rate`` steps/s for at most ``cap`` steps."""

    start: float
    rate: float
    cap: float

    def steps_by(self, t: float) -> float:
        return min(self.cap, self.rate * max(0.0, t - self.start))

    def stop_time(self) -> float:
        return self.start + (self.cap / self.rate if self.rate > 0 else float("inf"))


def steps_by(runs: Sequence[Run], t: float) -> float:
    return sum(r.steps_by(t) for r in runs)


def time_to_reach(runs: Sequence[Run], target: float, horizon: float) -> float | None:
    """Earliest t <= horizon at which the runs together have done ``target`` steps, else None."""
    if target <= 0:
        return 0.0
    if steps_by(runs, horizon) < target - 1e-9:
        return None
    points = sorted(
        {0.0, horizon, *(r.start for r in runs), *(min(r.stop_time(), horizon) for r in runs)}
    )
    prev = 0.0
    for t in points:
        if t > horizon:
            break
        if steps_by(runs, t) >= target - 1e-9:
            lo, hi = prev, t
            done_lo = steps_by(runs, lo)
            slope = sum(r.rate for r in runs if r.start <= lo and r.steps_by(lo) < r.cap)
            if slope <= 0:
                return hi
            return min(hi, lo + (target - done_lo) / slope)
        prev = t
    return horizon
