"""Which idle GPUs to fork which jobs onto: the fluid fork LP over the work that is left (pure maths).

The fork bound (``hadar/experiments/bounds.py``) shows what forking can reach at best: every job's
remaining steps spread over every GPU at once, each GPU's time shared among jobs. Forking the job
that would finish last onto *its* fastest idle GPU ignores comparative advantage: on AWS M-2 the
Transformer runs 2.5x faster on a T4 than on a K80 and the MM job only 1.6x, so the T4s are
worth more to the Transformer even though both jobs are fastest on them.

Given the copies a round's plan already runs (each job's ``base`` rate) and the idle cells, this
LP spreads the remaining steps so that the last job finishes soonest::

    minimise   T + eps * sum x                       (eps: prefer fast cells for slack jobs)
    s.t.       base_j T + sum_c r[j,c] x[j,c] >= rem_j    for each job j
               sum_j W_j x[j,c]              <= free_c T  for each cell c (node, GPU type)
               sum_{c on node h} x[j,c]       <= T        for each job j and node h (one copy)
               x >= 0

``x[j, c] / T`` is the share of cell ``c``'s time the fluid optimum gives job ``j``. A round gives
a cell one job's copy, so :func:`fork_preferences` lists the (job, cell) pairs by that share,
largest first: HadarE offers each idle cell to the jobs in that order (its usual checks decide)
and forks what is still idle as before. Deterministic for given inputs; HiGHS via scipy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from primal_dual.column_matrix import ColumnMatrix
from primal_dual.highs_lp import solve_lp

SLACK_WEIGHT = 1e-3
"""``eps`` above, divided by the number of cells: a tie-breaker among optimal fluid schedules,
far below what it could change in ``T`` (``sum x <= cells x T``)."""

MIN_SHARE = 1e-6
"""Shares below this (of ``T``) are solver noise, not a preference."""


@dataclass(frozen=True)
class ForkDemand:
    """One job's side of the LP: its steps left, the rate of the copies it already runs, its
    gang width and its rate on each cell ``[node, type]`` (0 where it cannot go or is already)."""

    job_id: int
    remaining: float
    base_rate: float
    width: int
    cell_rates: np.ndarray


def fork_preferences(demands: Sequence[ForkDemand], free: np.ndarray) -> list[tuple[int, int, int]]:
    """``(job id, node, type)`` pairs the fluid optimum gives a share of an idle cell, by share
    (largest first; ties by job, node, type). Empty when the LP has nothing to place or fails.
    Among equally good fluid schedules HiGHS returns one vertex; the columns are built in job-id
    order so that it never depends on the order ``demands`` come in."""
    free = np.asarray(free, dtype=float)
    demands = sorted(demands, key=lambda d: d.job_id)  # the LP's columns never follow input order
    cols: list[tuple[int, int, int]] = []  # (demand index, node, type)
    for i, d in enumerate(demands):
        ok = (free >= d.width) & (d.cell_rates > 0)
        for h, k in zip(*np.nonzero(ok), strict=True):
            cols.append((i, int(h), int(k)))
    rows_jobs = [
        i for i, d in enumerate(demands) if d.remaining > 0 and (d.base_rate > 0 or _has(cols, i))
    ]
    if not cols or not rows_jobs:
        return []
    nx = len(cols)
    t = nx
    data: list[float] = []
    r_idx: list[int] = []
    c_idx: list[int] = []
    b: list[float] = []
    row = 0
    job_row = {i: n for n, i in enumerate(rows_jobs)}
    for i in rows_jobs:  # -(base T + sum r x) <= -rem
        data.append(-demands[i].base_rate)
        r_idx.append(row + job_row[i])
        c_idx.append(t)
        b.append(-demands[i].remaining)
    cells = sorted({(h, k) for _, h, k in cols})
    cell_row = {c: len(rows_jobs) + n for n, c in enumerate(cells)}
    pairs = sorted({(i, h) for i, h, _ in cols})
    pair_row = {p: len(rows_jobs) + len(cells) + n for n, p in enumerate(pairs)}
    for col, (i, h, k) in enumerate(cols):
        if i in job_row:
            data.append(-float(demands[i].cell_rates[h, k]))
            r_idx.append(job_row[i])
            c_idx.append(col)
        data.append(float(demands[i].width))
        r_idx.append(cell_row[(h, k)])
        c_idx.append(col)
        data.append(1.0)
        r_idx.append(pair_row[(i, h)])
        c_idx.append(col)
    for h, k in cells:
        data.append(-float(free[h, k]))
        r_idx.append(cell_row[(h, k)])
        c_idx.append(t)
        b.append(0.0)
    for _ in pairs:
        b.append(0.0)
    for p in pairs:
        data.append(-1.0)
        r_idx.append(pair_row[p])
        c_idx.append(t)
    n_rows = len(rows_jobs) + len(cells) + len(pairs)
    a_ub = ColumnMatrix.from_entries(
        np.array(r_idx), np.array(c_idx), np.array(data), (n_rows, nx + 1)
    )
    cost = np.full(nx + 1, SLACK_WEIGHT / len(cells))
    cost[t] = 1.0
    res = solve_lp(cost, a_ub, np.array(b), np.zeros(nx + 1), np.full(nx + 1, np.inf))
    if not res.optimal or res.x[t] <= 0:
        return []
    span = float(res.x[t])
    ranked = [
        (-float(res.x[col]) / span, demands[i].job_id, h, k)
        for col, (i, h, k) in enumerate(cols)
        if res.x[col] > MIN_SHARE * span
    ]
    ranked.sort()
    return [(j, h, k) for _, j, h, k in ranked]


def _has(cols: Sequence[tuple[int, int, int]], i: int) -> bool:
    return any(c[0] == i for c in cols)
