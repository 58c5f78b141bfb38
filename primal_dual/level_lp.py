"""The level LP shared by Gavel's allocation policies and Hadar's TTD guard (HiGHS, as
``linprog`` would solve it: :mod:`primal_dual.highs_lp`).

Choose time fractions ``x[j][k]`` (the share of time job j spends on GPU type k) and a level ``t``:

    maximise  t
    s.t.      coef_j * sum_k T[j][k] x[j][k] >= t      for every job j
              sum_k x[j][k] <= 1                        for every job j
              sum_j W_j x[j][k] <= count_k              for every GPU type k
              0 <= x[j][k] <= 1; x[j][k] = 0 when T[j][k] = 0 or W_j > count_k

``T[j][k]`` is the job's whole-gang (W-GPU) throughput on type k. With ``coef_j = 1 / R_j``
(``R_j`` the job's remaining steps) the level is 1 / the fluid minimum makespan: every job
finishes its remaining steps by ``1 / t`` (Gavel's ``min_total_duration``, which binary-searches
the makespan over feasibility LPs; one LP is exact). Gavel's policies (``baselines.gavel_lp``)
and Themis build their LPs on it; Hadar's TTD guard uses the makespan as a lower bound on the
remaining TTD (``hadar/scheduler/ttd.py``).

A job that cannot run anywhere (no positive throughput on any type that can hold its gang) is
left out of the level constraints (otherwise it would pin ``t`` at 0) and gets ``x = 0``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hadar.core.errors import HadarError
from primal_dual.column_matrix import ColumnMatrix
from primal_dual.highs_lp import solve_lp


class LpError(HadarError):
    """The solver failed on an allocation LP (a bug or a numerical problem, not user input)."""


@dataclass(frozen=True)
class LpResult:
    """An allocation ``x[job, type]`` (clipped to [0, 1]) and the optimal level ``t``."""

    x: np.ndarray
    level: float


def runnable_mask(T: np.ndarray, W: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``[job, type]`` cells where the job can run at all: positive rate and enough GPUs."""
    return (T > 0) & (W[:, None] <= counts[None, :])


def solve_level_lp(T: np.ndarray, coef: np.ndarray, W: np.ndarray, counts: np.ndarray) -> LpResult:
    """Maximise ``t`` s.t. ``coef_j * sum_k T[j,k] x[j,k] >= t`` and the capacity constraints."""
    T = np.asarray(T, dtype=float)
    n, m = T.shape
    W = np.asarray(W, dtype=float)
    counts = np.asarray(counts, dtype=float)
    if n == 0 or m == 0:
        return LpResult(np.zeros((n, m)), 0.0)
    ok = runnable_mask(T, W, counts)
    coef = np.asarray(coef, dtype=float)
    active = ok.any(axis=1) & (coef > 0) & np.isfinite(coef)
    level_jobs = np.flatnonzero(active)
    if not level_jobs.size:
        return LpResult(np.zeros((n, m)), 0.0)
    nv = n * m
    row_of = np.full(n, -1)
    row_of[level_jobs] = np.arange(len(level_jobs))
    jj, kk = np.nonzero(ok)
    var = jj * m + kk
    lj, lk = jj[active[jj]], kk[active[jj]]
    nl = len(level_jobs)
    rows = np.concatenate(
        [
            row_of[lj],
            np.arange(nl),  # level: t - coef_j * sum_k T[j,k] x[j,k] <= 0
            nl + jj,  # time: sum_k x[j,k] <= 1
            nl + n + kk,  # capacity: sum_j W_j x[j,k] <= count_k
        ]
    )
    cols = np.concatenate([lj * m + lk, np.full(nl, nv), var, var])
    vals = np.concatenate([-coef[lj] * T[lj, lk], np.ones(nl), np.ones(len(jj)), W[jj]])
    a_ub = ColumnMatrix.from_entries(rows, cols, vals, (nl + n + m, nv + 1))
    b_ub = np.concatenate([np.zeros(nl), np.ones(n), counts])
    upper = np.append(np.where(ok, 1.0, 0.0).ravel(), np.inf)
    bounds = np.column_stack([np.zeros(nv + 1), upper])
    c = np.zeros(nv + 1)
    c[nv] = -1.0
    res = solve_lp(c, a_ub, b_ub, bounds[:, 0], bounds[:, 1])
    if not res.optimal:
        raise LpError(f"allocation LP failed ({n} jobs x {m} GPU types): {res.status}")
    x = np.clip(res.x[:nv].reshape(n, m), 0.0, 1.0)
    x[~ok] = 0.0
    return LpResult(x, float(res.x[nv]))


def min_makespan(
    T: np.ndarray, W: np.ndarray, counts: np.ndarray, remaining: np.ndarray
) -> LpResult:
    """The fluid minimum makespan (Gavel's ``min_total_duration``): the level is 1 / makespan."""
    rem = np.asarray(remaining, dtype=float)
    with np.errstate(divide="ignore"):
        coef = np.where(rem > 0, 1.0 / rem, 0.0)
    return solve_level_lp(T, coef, W, counts)
