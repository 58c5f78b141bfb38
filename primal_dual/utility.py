"""Job utility functions U_j(tau): non-increasing in the job completion time tau.

Both forms are value objects with a ``value(tau, weight, ideal)`` method, so a faster
allocation (smaller tau) never gets a lower utility. ``ideal`` is the job's duration on its
fastest GPU type (gamma3 of OASiS).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from hadar.core.defaults import SIMULATED

DEFAULT_FLOOR = 1e-12
"""Knob: scale of the utility floor (relative to the weight). The sigmoid underflows to 0 for
jobs that have waited more than ~140x their ideal duration; below it the utility follows
``floor x ideal / tau`` instead, which keeps the price range U_max/U_min finite (see
``prices.py``) and still ranks a faster allocation above a slower one (a flat floor would let
the price difference pick the slowest GPU)."""


class Utility(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def clock(self) -> str:
        """What ``tau`` is measured from: ``"arrival"`` (the job's completion time, JCT) or
        ``"now"`` (the time from this round's start to completion, the job's remaining
        completion time)."""
        ...

    def value(self, tau: float, weight: float, ideal: float) -> float:
        """Utility of finishing ``tau`` seconds after the utility's clock origin."""
        ...


@dataclass(frozen=True)
class SigmoidUtility:
    """OASiS's sigmoid: ``gamma1 / (1 + exp(gamma2 * (tau - gamma3) / gamma3))``.

    gamma1 = job weight, gamma2 = decay (knob, default 5), gamma3 = ideal duration.
    """

    gamma2: float = 5.0
    floor: float = DEFAULT_FLOOR
    name: str = "sigmoid"
    clock: str = "arrival"

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
    clock: str = "arrival"

    def value(self, tau: float, weight: float, ideal: float) -> float:
        return weight * max(
            min(1.0, ideal / max(tau, 1e-9)) if tau > 0 else 1.0,
            _soft_floor(self.floor, tau, ideal),
        )


RANKED_SPEEDUP = "ranked-speedup"


@dataclass(frozen=True)
class RankedSpeedupUtility(InverseSlowdownUtility):
    """``w_j * T_best / tau`` on the clock from now, where the caller sets ``ideal`` to the job's
    remaining time at its best configuration and ``weight`` to its rank among the jobs present
    by that time (the longest 1, the next 2, ...): the allocation that minimises the mean JCT of
    jobs with sub-linear speed-ups (heSRPT, Berg et al.) shares the GPUs among every job, more
    to the shorter, with weights that grow with the rank, not with 1 / remaining."""

    name: str = RANKED_SPEEDUP
    clock: str = "now"


@dataclass(frozen=True)
class InverseJctUtility:
    """``w_j * scale / tau``, tau = the job's completion time from its arrival (JCT)."""

    scale: float = 3600.0
    name: str = "inverse-jct"
    clock: str = "arrival"

    def value(self, tau: float, weight: float, ideal: float) -> float:
        return weight * self.scale / max(tau, 1e-9)


@dataclass(frozen=True)
class InverseRemainingUtility(InverseJctUtility):
    """``w_j * scale / tau``, tau = the time from now until the job completes.

    The inverse-JCT form on the clock that matters for a decision taken now: time already spent
    waiting is sunk and the same whatever this round decides. Maximising the sum over the admitted
    jobs is the cmu rule (weighted shortest remaining processing time): each job's value is the
    weighted fraction of its remaining work that one second of the allocation completes, which
    is the myopically optimal order for the sum of weighted JCTs, and it values a faster GPU
    exactly by the job's own speed-up there."""

    name: str = "inverse-remaining"
    clock: str = "now"


@dataclass(frozen=True)
class RoundProgressUtility:
    """``w_j * round / max(tau, round)``, tau = the time from now until the job completes.

    The inverse-remaining form with the round as the unit of service: the fraction of the job's
    remaining work that one round of this allocation completes (capped at 1). Finishing earlier
    within a round frees nothing (the round is the scheduling unit), so every allocation that
    finishes the job this round is worth the same, and a job that will finish anyway does not
    outbid, for the fastest GPUs, a long job that gains a whole round of progress there."""

    round_s: float = SIMULATED.round_s
    """The round's length (the Hadar policy sets it to the run's round)."""
    name: str = "round-progress"
    clock: str = "now"

    def value(self, tau: float, weight: float, ideal: float) -> float:
        return weight * self.round_s / max(tau, self.round_s, 1e-9)


def rate_utility(
    utility: Utility, start: float, remaining: float, weight: float, ideal: float
) -> Callable[[float], float]:
    """``rate -> utility.value(start + remaining / rate, weight, ideal)``: a job's utility as a
    function of its allocation's rate. For the inverse forms the value is computed inline, the
    same floating-point operations in the same order (so the same floats), without the method
    call: the DP and FIND_ALLOC evaluate it for every candidate."""
    if type(utility) in (InverseJctUtility, InverseRemainingUtility):
        scaled: float = weight * utility.scale  # type: ignore[attr-defined]

        def inverse(rate: float) -> float:
            return scaled / max(start + remaining / rate, 1e-9)

        return inverse
    value = utility.value

    def u(rate: float) -> float:
        return value(start + remaining / rate, weight, ideal)

    return u


def _soft_floor(floor: float, tau: float, ideal: float) -> float:
    """``floor x min(1, ideal / tau)``: tiny, but still decreasing in tau."""
    return floor * min(1.0, ideal / max(tau, 1e-9))


UTILITIES: dict[str, Callable[..., Utility]] = {
    "sigmoid": SigmoidUtility,
    "inverse-slowdown": InverseSlowdownUtility,
    "inverse-jct": InverseJctUtility,
    "inverse-remaining": InverseRemainingUtility,
    "round-progress": RoundProgressUtility,
}

ELASTIC_UTILITIES: dict[str, Callable[..., Utility]] = {
    **UTILITIES,
    RANKED_SPEEDUP: RankedSpeedupUtility,
}
"""The utilities that may value elastic jobs' configurations: :data:`UTILITIES` and the ranked
speed-up, whose weights and ideal times come from the configuration LP's jobs together."""


def make_utility(name: str, **params: float) -> Utility:
    """A utility function by name (one of :data:`ELASTIC_UTILITIES`)."""
    try:
        return ELASTIC_UTILITIES[name](**params)
    except KeyError:
        raise ValueError(
            f"unknown utility {name!r} (known: {', '.join(ELASTIC_UTILITIES)})"
        ) from None
