"""Lower bounds on the total time duration (TTD) of a batch of 1-GPU jobs (pure maths).

Machines are the cluster's GPUs; ``rates[j, g]`` is job ``j``'s steps/s alone on GPU ``g`` (0 when it
cannot run there) and ``steps[j]`` its total steps. ``x[j, g] >= 0`` is the time job ``j`` spends on
GPU ``g``. Both bounds relax restart penalties, aggregation overheads, round (slot) boundaries and
arrival times, so no schedule of the simulator can beat them:

* ``fork_s`` (any policy, HadarE included): ``min T`` s.t. ``sum_g rates[j,g] x[j,g] >= steps[j]``
  for every job and ``sum_j x[j,g] <= T`` for every GPU. Copies of a job may run at the same time on
  different GPUs (forking), so this is the optimum of the divisible ("fluid") problem.
* ``nofork_s`` (policies that run a job on one GPU at a time: Gavel, Hadar): the same LP plus
  ``sum_g x[j,g] <= T`` for every job. This is Lawler & Labetoulle's LP for R|pmtn|Cmax, whose
  optimum is attained by a preemptive schedule with free migration.
* ``fastest_job_s``: ``max_j steps[j] / max_g rates[j,g]``, the longest job on its fastest GPU;
  implied by (so never above) ``nofork_s``, reported because it is easy to check by hand.

* :func:`discounted_fork_s`: the fork bound when ``k`` copies of job ``j`` running at once each
  progress at most ``factors[j, k]`` (<= 1) times their rate, as under the simulator's ``goodput``
  accounting of forks. Each job's time is split by how many copies it runs at once: ``y[j, k]``
  seconds with ``k`` copies, ``x[j, g, k]`` of them on GPU ``g``, with ``sum_g x[j, g, k] <= k
  y[j, k]``, ``x[j, g, k] <= y[j, k]`` and ``sum_k y[j, k] <= T``. With every factor 1 it is
  ``fork_s``; with every factor for ``k >= 2`` zero, ``nofork_s``.

``sum_j steps[j] / sum_g rates[j,g]`` (every job on the whole cluster, one after another) is *not*
a lower bound once the rates are not proportional across GPUs: it is a feasible fork schedule,
hence >= ``fork_s``, with equality when they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from estimators.throughput import ThroughputModel
from hadar.core.cluster import Cluster
from hadar.core.jobs import Job


@dataclass(frozen=True)
class TtdBounds:
    """Lower bounds on TTD in seconds; None when they do not apply (multi-GPU jobs)."""

    fork_s: float | None
    nofork_s: float | None
    fastest_job_s: float | None

    def for_policy(self, forks: bool) -> float | None:
        """The bound that applies to a policy that forks jobs (``fork_s``) or not (``nofork_s``)."""
        return self.fork_s if forks else self.nofork_s


NO_BOUNDS = TtdBounds(None, None, None)


def rate_matrix(
    jobs: Sequence[Job], cluster: Cluster, throughput: ThroughputModel
) -> np.ndarray | None:
    """``[job, GPU]`` steps/s of 1-GPU jobs, one column per GPU of the cluster (node order, then
    type order); None when some job needs more than one GPU."""
    if any(j.num_gpus != 1 for j in jobs):
        return None
    columns = [
        (h, cluster.type_index[k])
        for h, node in enumerate(cluster.nodes)
        for k, count in node.gpus.items()
        for _ in range(count)
    ]
    rows = []
    for job in jobs:
        cons, _ = throughput.cell_rates(job, cluster)
        rows.append([float(cons[h, k]) for h, k in columns])
    return np.array(rows, dtype=float).reshape(len(jobs), len(columns))


def ttd_bounds(rates: np.ndarray, steps: Sequence[float]) -> TtdBounds:
    """The three bounds for ``rates[j, g]`` and ``steps[j]`` (see the module docstring)."""
    n = np.asarray(steps, dtype=float)
    if rates.shape[0] == 0 or not (n > 0).any():
        return TtdBounds(0.0, 0.0, 0.0)
    best = rates.max(axis=1)
    if (best[n > 0] <= 0).any():
        raise ValueError("a job cannot run on any GPU")
    fastest = float(np.max(np.where(n > 0, n / np.where(best > 0, best, 1.0), 0.0)))
    return TtdBounds(_lp(rates, n, fork=True), _lp(rates, n, fork=False), fastest)


def mix_bounds(jobs: Sequence[Job], cluster: Cluster, throughput: ThroughputModel) -> TtdBounds:
    """:func:`ttd_bounds` of ``jobs`` on ``cluster``; :data:`NO_BOUNDS` for multi-GPU jobs."""
    rates = rate_matrix(jobs, cluster, throughput)
    if rates is None:
        return NO_BOUNDS
    return ttd_bounds(rates, [j.total_steps for j in jobs])


def _lp(rates: np.ndarray, steps: np.ndarray, fork: bool) -> float:
    jobs, gpus = rates.shape
    nx = jobs * gpus
    t = nx  # index of T
    a_rows: list[np.ndarray] = []
    b: list[float] = []
    for j in range(jobs):
        row = np.zeros(nx + 1)
        row[j * gpus : (j + 1) * gpus] = -rates[j]
        a_rows.append(row)
        b.append(-steps[j])
        if not fork:
            row = np.zeros(nx + 1)
            row[j * gpus : (j + 1) * gpus] = 1.0
            row[t] = -1.0
            a_rows.append(row)
            b.append(0.0)
    for g in range(gpus):
        row = np.zeros(nx + 1)
        row[g:nx:gpus] = 1.0
        row[t] = -1.0
        a_rows.append(row)
        b.append(0.0)
    cost = np.zeros(nx + 1)
    cost[t] = 1.0
    var_bounds = [
        (0.0, 0.0 if rates[j, g] <= 0 else None) for j in range(jobs) for g in range(gpus)
    ]
    from scipy.optimize import linprog  # here: the CLI imports this module for every command

    res = linprog(
        cost,
        A_ub=np.vstack(a_rows),
        b_ub=np.array(b),
        bounds=[*var_bounds, (0.0, None)],
        method="highs",
    )
    if res.status != 0:
        raise ValueError(f"TTD bound LP failed: {res.message}")
    return float(res.fun)


def discounted_fork_s(rates: np.ndarray, steps: Sequence[float], factors: np.ndarray) -> float:
    """The fork bound with ``factors[j, k - 1]`` (<= 1) on the rate of each of ``k`` copies of job
    ``j`` running at once (module docstring); ``factors`` has one column per copy count, 1 to
    the number of GPUs."""
    from scipy.optimize import linprog  # here: the CLI imports this module for every command
    from scipy.sparse import coo_matrix

    jobs, gpus = rates.shape
    copies = factors.shape[1]
    if factors.shape[0] != jobs or copies < 1:
        raise ValueError("factors: one row per job and at least one copy count")
    nx = jobs * gpus * copies  # x[j, g, k] at (j * gpus + g) * copies + k
    ny = jobs * copies  # y[j, k] at nx + j * copies + k
    t = nx + ny
    jj, gg, kk = (
        a.ravel()
        for a in np.meshgrid(np.arange(jobs), np.arange(gpus), np.arange(copies), indexing="ij")
    )
    xi = np.arange(nx)
    yi = nx + jj * copies + kk
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    b: list[np.ndarray] = []
    start = 0

    def add(r: np.ndarray, c: np.ndarray, v: np.ndarray, n: int, rhs: np.ndarray) -> None:
        nonlocal start
        rows.append(start + r)
        cols.append(c)
        vals.append(v)
        b.append(rhs)
        start += n

    # progress: sum_{g,k} f[j,k] r[j,g] x[j,g,k] >= steps[j]
    add(jj, xi, -factors[jj, kk] * rates[jj, gg], jobs, -np.asarray(steps, dtype=float))
    # each GPU: sum_{j,k} x[j,g,k] <= T
    add(gg, xi, np.ones(nx), 0, np.zeros(0))
    add(np.arange(gpus), np.full(gpus, t), -np.ones(gpus), gpus, np.zeros(gpus))
    # k copies at once: sum_g x[j,g,k] <= k y[j,k]
    pair = jj * copies + kk
    add(pair, xi, np.ones(nx), 0, np.zeros(0))
    add(np.arange(ny), nx + np.arange(ny), -(np.arange(ny) % copies + 1.0), ny, np.zeros(ny))
    # one GPU at most for the whole of y[j,k]: x[j,g,k] <= y[j,k]
    add(np.arange(nx), xi, np.ones(nx), 0, np.zeros(0))
    add(np.arange(nx), yi, -np.ones(nx), nx, np.zeros(nx))
    # each job's time: sum_k y[j,k] <= T
    add(np.arange(ny) // copies, nx + np.arange(ny), np.ones(ny), 0, np.zeros(0))
    add(np.arange(jobs), np.full(jobs, t), -np.ones(jobs), jobs, np.zeros(jobs))
    a = coo_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(start, t + 1)
    ).tocsr()
    cost = np.zeros(t + 1)
    cost[t] = 1.0
    x_bounds = [(0.0, 0.0 if rates[j, g] <= 0 else None) for j, g in zip(jj, gg, strict=True)]
    res = linprog(
        cost,
        A_ub=a,
        b_ub=np.concatenate(b),
        bounds=[*x_bounds, *([(0.0, None)] * (ny + 1))],
        method="highs",
    )
    if res.status != 0:
        raise ValueError(f"TTD bound LP failed: {res.message}")
    return float(res.fun)
