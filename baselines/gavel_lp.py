"""Gavel's allocation LPs (Narayanan et al., OSDI 2020), solved with HiGHS through scipy.

Gavel's max-min fairness and min-makespan policies share one shape. Choose time fractions
``x[j][k]`` (the share of time job j should spend on GPU type k) and a level ``t``:

    maximise  t
    s.t.      coef_j * sum_k T[j][k] x[j][k] >= t      for every job j
              sum_k x[j][k] <= 1                        for every job j
              sum_j W_j x[j][k] <= count_k              for every GPU type k
              0 <= x[j][k] <= 1; x[j][k] = 0 when T[j][k] = 0 or W_j > count_k

``T[j][k]`` is the job's whole-gang (W-GPU, consolidated) throughput on type k.

* Max-min fairness: ``coef_j = s_j / (w_j * T_equal[j])`` where ``T_equal[j] = sum_k T[j][k] *
  count_k / sum(count)`` is the job's throughput when its time is spread over the types in
  proportion to their GPU counts (Gavel's ``ProportionalPolicy``), ``w_j`` its priority weight
  and ``s_j`` its scale factor W_j (Gavel multiplies the normalised throughput by the scale
  factor so that jobs receive equal GPU-time; ``scale_in_objective=False`` drops it).
* Min-makespan: minimise T such that every job can finish its remaining steps ``R_j`` in T,
  i.e. ``sum_k T[j][k] x[j][k] >= R_j / T``. With ``t = 1/T`` this is the shape above with
  ``coef_j = 1 / R_j`` (Gavel binary-searches T over feasibility LPs; one LP is exact).

A job that cannot run anywhere (no positive throughput on any type that can hold its gang) is
left out of the level constraints (otherwise it would pin ``t`` at 0) and gets ``x = 0``.
"""

from __future__ import annotations

import numpy as np

from primal_dual.level_lp import LpError, LpResult, min_makespan, runnable_mask, solve_level_lp

__all__ = [
    "LpError",
    "LpResult",
    "equal_share_throughput",
    "max_min_fairness",
    "min_makespan",
    "runnable_mask",
    "solve_level_lp",
]


def equal_share_throughput(T: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Gavel's ``T_equal``: throughput with time split over types in proportion to their counts."""
    total = float(counts.sum())
    if total <= 0:
        return np.zeros(T.shape[0])
    return T @ (counts / total)


def max_min_fairness(
    T: np.ndarray,
    W: np.ndarray,
    counts: np.ndarray,
    weights: np.ndarray | None = None,
    scale_in_objective: bool = True,
) -> LpResult:
    """Gavel's heterogeneity-aware max-min fairness (``max_min_fairness_perf``)."""
    T = np.asarray(T, dtype=float)
    W = np.asarray(W, dtype=float)
    counts = np.asarray(counts, dtype=float)
    w = np.ones(T.shape[0]) if weights is None else np.asarray(weights, dtype=float)
    t_eq = equal_share_throughput(T, counts)
    scale = W if scale_in_objective else np.ones_like(W)
    with np.errstate(divide="ignore", invalid="ignore"):
        coef = np.where(t_eq > 0, scale / (w * t_eq), 0.0)
    return solve_level_lp(T, coef, W, counts)
