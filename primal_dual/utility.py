"""Job utility functions U_j(tau): non-increasing in the job completion time tau.

Both forms are value objects with a ``value(tau, weight, ideal)`` method, so a faster
allocation (smaller tau) never gets a lower utility. ``ideal`` is the job's duration on its
fastest GPU type (gamma3 of OASiS).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

DEFAULT_FLOOR = 1e-12
"""Knob: scale of the utility floor (relative to the weight). The sigmoid underflows to 0 for
jobs that have waited more than ~140x their ideal duration; below it the utility follows
``floor x ideal / tau`` instead, which keeps the price range U_max/U_min finite (see
``prices.py``) and still ranks a faster allocation above a slower one (a flat floor would let
the price difference pick the slowest GPU)."""


class Utility(Protocol):
    name: str

    def value(self, tau: float, weight: float, ideal: float) -> float:
        """Utility of finishing ``tau`` seconds after arrival."""
        ...


@dataclass(frozen=True)
class SigmoidUtility:
    """OASiS's sigmoid: ``gamma1 / (1 + exp(gamma2 * (tau - gamma3) / gamma3))``.

    gamma1 = job weight, gamma2 = decay (knob, default 5), gamma3 = ideal duration.
    """

    gamma2: float = 5.0
    floor: float = DEFAULT_FLOOR
    name: str = "sigmoid"

    def value(self, tau: float, weight: float, ideal: float) -> float:
        ideal = max(ideal, 1e-9)
        z = self.gamma2 * (tau - ideal) / ideal
        u = 0.0 if z > 700.0 else 1.0 / (1.0 + math.exp(z))
        return weight * max(u, _soft_floor(self.floor, tau, ideal))


@dataclass(frozen=True)
class InverseSlowdownUtility:
    """``w_j * T_ideal / tau``: the job's speed relative to running alone on its best GPUs."""

    floor: float = DEFAULT_FLOOR
    name: str = "inverse-slowdown"

    def value(self, tau: float, weight: float, ideal: float) -> float:
        return weight * max(min(1.0, ideal / max(tau, 1e-9)) if tau > 0 else 1.0, _soft_floor(self.floor, tau, ideal))


def _soft_floor(floor: float, tau: float, ideal: float) -> float:
    """``floor x min(1, ideal / tau)``: tiny, but still decreasing in tau."""
    return floor * min(1.0, ideal / max(tau, 1e-9))


UTILITIES: dict[str, type] = {"sigmoid": SigmoidUtility, "inverse-slowdown": InverseSlowdownUtility}


def make_utility(name: str, **params: float) -> Utility:
    """A utility function by name (``sigmoid`` or ``inverse-slowdown``)."""
    try:
        return UTILITIES[name](**params)
    except KeyError:
        raise ValueError(f"unknown utility {name!r} (known: {', '.join(UTILITIES)})") from None
