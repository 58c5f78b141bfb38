"""Per-type GPU prices as the exact dual of one round's allocation LP (P2 -> P3 for one round).

With every job re-planned each round, a round's allocation is an offline problem over the jobs
present. Its LP relaxation, aggregated per GPU type k (C_k GPUs), with ``v[j,k]`` the utility of
running job j's gang (W_j GPUs) on type k this round:

    maximise   sum_jk v[j,k] x[j,k]
    s.t.       sum_k x[j,k] <= 1                 (one placement per job)       dual mu_j >= 0
               sum_j W_j x[j,k] <= C_k           (GPUs of type k)              dual p_k  >= 0
               x >= 0

Its dual is exactly the paper's P3: ``minimise sum_j mu_j + sum_k C_k p_k`` s.t.
``mu_j >= v[j,k] - W_j p_k``, i.e. ``mu_j = max_k (v[j,k] - W_j p_k)^+`` is the job's payoff at
prices ``p``. OASiS's exponential price function (Eq. 5-7) approximates these prices online, when
allocations are fixed for a job's lifetime and future jobs are unknown; here they are computed
exactly for the round (HiGHS). A job whose best payoff at these prices is positive is one the LP
runs (complementary slackness); jobs compete for a type by how much more it is worth to them
than the alternatives, so the fast GPUs go to the jobs with the largest advantage on them.

The LP goes to HiGHS through its own Python API (``highspy``), column-wise as built: scipy's
``linprog`` reaches the same solver with the same options but spends twice the solve time
validating and converting its inputs (226 LPs of ``philly-480``: 0.49 s -> 0.23 s, the same
duals bit for bit). A round whose LP is degenerate (a GPU type exactly filled) has many optimal
duals, and which one HiGHS returns can change between its releases; pyproject.toml pins highspy's
minor version so a simulation replays identically on every install.

Jobs with the same values and gang are interchangeable in the LP: above
``INTERIOR_POINT_ABOVE_JOBS`` they become one row ``sum_k x[j,k] <= copies`` (its dual is each
copy's ``mu_j``). The dual objective as a function of the prices is unchanged, so the set of
optimal prices is the same; the 100,000-job benchmark round's LP has 21,529 distinct rows and
solves in 0.9 s instead of 5.1 s. Smaller LPs are built job by job, as before, so that their
(possibly non-unique, degenerate) duals stay those of earlier releases.

When the queue is much longer than the cluster (2,048 jobs for 60 GPUs), most rows cannot matter:
a job whose payoff ``max_k v[j,k] - W_j p_k`` is at most 0 at the optimal prices is left out of
the optimum. Above ``RESTRICTED_ABOVE_JOBS`` the LP is first solved over the jobs with the best
value per GPU on some type (those filling ``RESTRICTED_DEMAND`` x its GPUs), then every job left
out is priced at the restricted LP's prices and those with a positive payoff are added, until none
has one (column generation, exact: the restricted LP's primal optimum is feasible for the whole
LP, and its prices with ``mu_j = 0`` for the jobs left out are dual feasible, with the same
objective). Where the restricted LP would start with more than ``RESTRICTED_SHARE`` of the rows
(a cluster about as large as its queue's demand, where most jobs end up priced in), the whole LP is
solved.
"""

from __future__ import annotations

import numpy as np

from primal_dual.column_matrix import ColumnMatrix

INTERIOR_POINT_ABOVE_JOBS = 4096
"""LPs over more jobs than this are solved by HiGHS's interior-point method (with crossover):
0.2 s instead of 5-11 s by dual simplex at 10,000 jobs on 8,192 GPUs, where the LP is highly
degenerate. Both return optimal duals; where the optimal prices are not unique they may return
different ones (0.04 % apart on that benchmark round), so decisions on rounds this large can
differ from the simplex's. HiGHS's presolve is off there: it found nothing to remove and cost
15-20 % of the solve (10,000 jobs 0.085 -> 0.071 s, 100,000 jobs 0.59 -> 0.50 s, the same
prices). Rounds of the paper's workloads (at most a few hundred jobs) and of up to this many jobs
are solved exactly as before."""

RESTRICTED_ABOVE_JOBS = 512
"""LPs over more jobs than this are solved by column generation (module docstring) where it pays:
at 2,048 jobs on sim-60gpu, 86 rows instead of 2,048 and 1 ms instead of 20-48 ms, the same
prices. Its prices are optimal duals too, but where they are not unique (a degenerate round) they
may be another optimal vertex than the whole LP's; rounds of up to this many jobs (the paper's
workloads) are solved whole, as before."""

RESTRICTED_DEMAND = 2.0
"""The restricted LP starts with, per GPU type, the jobs of the best value per GPU there whose
gangs fill this many times the type's GPUs."""

RESTRICTED_SHARE = 0.25
"""Column generation runs only where its first LP holds at most this share of the rows: at 10,000
jobs on 8,192 GPUs it would start with half of them and price in nearly all the rest (two solves,
0.2 s, for one of 0.1 s)."""


def type_prices(values: np.ndarray, gang: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Optimal dual prices ``p[k] >= 0`` per GPU of type k (0 for an uncontended type).

    ``values[j, k] > 0`` where job j can run on type k (else 0), ``gang[j]`` = W_j,
    ``capacity[k]`` = C_k. Deterministic for given inputs."""
    values = np.asarray(values, dtype=float)
    n, m = values.shape if values.ndim == 2 else (0, len(capacity))
    capacity = np.asarray(capacity, dtype=float)
    if n == 0 or m == 0:
        return np.zeros(m)
    jj, kk = np.nonzero(values > 0)
    if jj.size == 0:
        return np.zeros(m)
    w = np.asarray(gang, dtype=float)
    demand = np.bincount(kk, weights=w[jj], minlength=m)  # GPUs of type k all its jobs could take
    if bool((demand < capacity).all()):
        # no type can be filled: every capacity row is slack at every feasible point, so its dual
        # is 0 in every optimal solution (complementary slackness): nothing to solve
        return np.zeros(m)
    copies = np.ones(n)
    interior_point = n > INTERIOR_POINT_ABOVE_JOBS
    if interior_point:  # identical jobs as one row (module docstring)
        rows, counts = np.unique(np.column_stack([values, w]), axis=0, return_counts=True)
        values, w, n, copies = rows[:, :m], rows[:, m], len(rows), counts.astype(float)
        jj, kk = np.nonzero(values > 0)
    if n > RESTRICTED_ABOVE_JOBS:
        rows_in = _initial_rows(values, w, copies, capacity)
        if RESTRICTED_SHARE * n >= int(rows_in.sum()):
            return _restricted_prices(values, w, copies, capacity, rows_in)
    prices, _ = _dual_prices(jj, kk, values[jj, kk], w[jj], copies, capacity, interior_point)
    return prices


def _initial_rows(
    values: np.ndarray, w: np.ndarray, copies: np.ndarray, capacity: np.ndarray
) -> np.ndarray:
    """Per type, the jobs of the best value per GPU whose gangs (with their copies) fill
    :data:`RESTRICTED_DEMAND` times its GPUs (ties broken by row order): a mask over the rows."""
    rows_in = np.zeros(len(values), dtype=bool)
    per_gpu = values / w[:, None]
    for k in range(values.shape[1]):
        order = np.argsort(-per_gpu[:, k], kind="stable")
        order = order[values[order, k] > 0]
        filled = np.cumsum(w[order] * copies[order])
        rows_in[order[: int(np.searchsorted(filled, RESTRICTED_DEMAND * capacity[k])) + 1]] = True
    return rows_in


def _restricted_prices(
    values: np.ndarray,
    w: np.ndarray,
    copies: np.ndarray,
    capacity: np.ndarray,
    rows_in: np.ndarray,
) -> np.ndarray:
    """Column generation from ``rows_in`` (module docstring): adds every job left out with a
    positive payoff at the restricted prices until none has one. Mutates ``rows_in``."""
    runnable = values > 0
    while True:
        rows = np.flatnonzero(rows_in)
        sub = values[rows]
        jj, kk = np.nonzero(sub > 0)
        big = len(rows) > INTERIOR_POINT_ABOVE_JOBS
        prices, _ = _dual_prices(jj, kk, sub[jj, kk], w[rows][jj], copies[rows], capacity, big)
        payoff = np.where(runnable, values - w[:, None] * prices[None, :], -np.inf).max(axis=1)
        priced_in = (payoff > 0) & ~rows_in
        if not priced_in.any():  # the restricted optimum is the whole LP's
            return prices
        rows_in |= priced_in


def configuration_lp(
    job: np.ndarray,
    gpu_type: np.ndarray,
    width: np.ndarray,
    value: np.ndarray,
    capacity: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The round's LP over *configurations*: column ``c`` runs job ``job[c]`` on ``width[c]``
    GPUs of type ``gpu_type[c]`` for utility ``value[c]``; each job takes at most one
    configuration in all (the LP above with a job's gang free to vary, as an elastic job's is).
    Returns the optimal dual prices per type and the optimal share ``x[c]`` of each column; in a
    basic optimum at most one job per type is split between configurations. A job's best
    configuration at the prices maximises ``value - width x price``. Jobs are numbered 0..n-1."""
    job = np.asarray(job, dtype=np.int64)
    value = np.asarray(value, dtype=float)
    keep = value > 0
    capacity = np.asarray(capacity, dtype=float)
    m = len(capacity)
    shares = np.zeros(len(value))
    if not keep.any() or m == 0:
        return np.zeros(m), shares
    jj, kk = job[keep], np.asarray(gpu_type, dtype=np.int64)[keep]
    w = np.asarray(width, dtype=float)[keep]
    n = int(job.max()) + 1
    demand = np.bincount(kk, weights=w, minlength=m)
    if bool((demand < capacity).all()):
        # nothing contended: every job takes its most valuable configuration, at price 0
        cols = np.flatnonzero(keep)
        best: dict[int, int] = {}
        for c in cols:
            j = int(job[c])
            if j not in best or value[c] > value[best[j]]:
                best[j] = int(c)
        shares[list(best.values())] = 1.0
        return np.zeros(m), shares
    prices, x = _dual_prices(jj, kk, value[keep], w, np.ones(n), capacity, False)
    shares[keep] = x
    return prices, shares


def _dual_prices(
    jj: np.ndarray,
    kk: np.ndarray,
    col_value: np.ndarray,
    col_width: np.ndarray,
    copies: np.ndarray,
    capacity: np.ndarray,
    interior_point: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """HiGHS on ``max sum value x`` s.t. per job row ``sum x <= copies``, per type row ``sum width
    x <= capacity``: the type rows' duals, clipped at 0, and ``x`` (zeros if not solved)."""
    # imported here, on the first LP: importing a policy (the CLI's parsers list them) stays light
    import highspy
    from highspy._core import _Highs

    n, m, nv = len(copies), len(capacity), jj.size
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = nv, n + m
    lp.col_cost_ = -col_value  # HiGHS minimises
    lp.col_lower_, lp.col_upper_ = np.zeros(nv), np.full(nv, highspy.kHighsInf)
    lp.row_lower_ = np.full(n + m, -highspy.kHighsInf)
    lp.row_upper_ = np.concatenate([copies, capacity])
    # column c has two entries: 1 in its job's row, its width in its type's row
    a = ColumnMatrix.pairs(jj, n + kk, col_width, n + m)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = a.start, a.index, a.value
    # the solver class that ``highspy.Highs`` extends: without the wrapper's callback machinery,
    # which costs a third of a small solve and prints a banner once per process
    solver = _Highs()
    solver.setOptionValue("output_flag", False)
    solver.setOptionValue("solver", "ipm" if interior_point else "choose")
    if interior_point:  # nothing for presolve to remove once identical jobs are one row
        solver.setOptionValue("presolve", "off")
    solver.setOptionValue("simplex_strategy", 1)  # dual simplex, as scipy's linprog asks
    solver.passModel(lp)
    solver.run()
    if solver.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return np.zeros(m), np.zeros(nv)
    solution = solver.getSolution()
    duals = -np.asarray(solution.row_dual, dtype=float)[n:]
    prices: np.ndarray = np.maximum(duals, 0.0)
    return prices, np.asarray(solution.col_value, dtype=float)
