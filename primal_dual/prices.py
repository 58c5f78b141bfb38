"""The exponential GPU price function of OASiS/Hadar (Eq. 5-7).

    p[h][k] = U_min[k] * (U_max[k] / U_min[k]) ** (g[h][k] / c[h][k])                 (5)
    U_max[k] = max_j U_j(ideal duration on k) / W_j                                   (6)
    U_min[k] = 1/(4 eta) * min_j U_j(latest completion) / (W_j * rounds_j[k])          (7)

Computed in log space so huge ranges U_max/U_min neither overflow nor lose precision.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PriceBounds:
    """Per-GPU-type bounds of the price function (arrays indexed by GPU type)."""

    u_min: np.ndarray
    u_max: np.ndarray

    def __post_init__(self) -> None:
        if np.any(self.u_min <= 0) or np.any(self.u_max <= 0):
            raise ValueError("price bounds must be positive")


def price_matrix(bounds: PriceBounds, allocated: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Eq. 5 for every ``[node, type]`` cell; cells with no capacity get +inf."""
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(capacity > 0, allocated / np.maximum(capacity, 1), 0.0)
    log_lo = np.log(bounds.u_min)[None, :]
    log_hi = np.log(bounds.u_max)[None, :]
    p = np.exp(log_lo + frac * (log_hi - log_lo))
    return np.where(capacity > 0, p, np.inf)


def price_bounds(
    ideal_utility: np.ndarray,
    latest_utility: np.ndarray,
    num_gpus: np.ndarray,
    rounds: np.ndarray,
    runnable: np.ndarray,
    eta: float = 1.0,
) -> PriceBounds:
    """Eq. 6-7 over a set of jobs.

    Arrays are indexed ``[job, type]`` except ``latest_utility`` and ``num_gpus`` (``[job]``):
    ``ideal_utility[j, k]`` = U_j(ideal duration on k); ``latest_utility[j]`` = U_j(latest
    completion); ``rounds[j, k]`` = rounds j needs on type k; ``runnable[j, k]`` = whether j can
    run on type k at all. Types no job can use get a flat price of 1.
    """
    if eta < 1:
        raise ValueError("eta must be >= 1")
    n_types = runnable.shape[1] if runnable.ndim == 2 else 0
    u_max = np.ones(n_types)
    u_min = np.ones(n_types)
    w = num_gpus.astype(float)[:, None]
    for k in range(n_types):
        mask = runnable[:, k]
        if not mask.any():
            continue
        u_max[k] = float(np.max(ideal_utility[mask, k] / w[mask, 0]))
        per = latest_utility[mask] / (w[mask, 0] * np.maximum(rounds[mask, k], 1))
        u_min[k] = float(np.min(per)) / (4.0 * eta)
        u_min[k] = min(u_min[k], u_max[k])
    return PriceBounds(u_min=u_min, u_max=u_max)
