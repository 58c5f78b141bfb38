"""The exact optimum of one round's allocation problem, as an ILP (scipy's HiGHS ``milp``).

Used by tests and ``benchmarks/bench_optimality_gap.py`` to measure how far the DP's plan is from
the best one; never by the scheduler (an ILP does not scale to a production queue).

The problem is the DP's: each job takes at most one placement ``x[node, type]`` of exactly W_j
GPUs on the free GPUs, the placements fit together, and a placement pays the job's payoff
``U_j(rate) - cost * hold_j(rate)`` with ``cost = sum price[h, k] x[h, k]`` at fixed prices
(``CandidateCache.fixed``, e.g. the round's LP-dual prices, or none). Any placement is allowed,
not only FIND_ALLOC's candidates, so this is the true optimum.

The rate of a placement is its bottleneck (the minimum over the cells it uses of the
consolidated rate on one node, of the unconsolidated rate across nodes), which is not linear.
The ILP enumerates it instead: for every job one option per (node, consolidated rate level)
and per unconsolidated rate level, each restricted to the cells at least that fast and valued at
that level. An option's value is a lower bound on its placement's payoff (utility rises and
hold rounds fall with the rate), and the option at a placement's own bottleneck values it
exactly, so the ILP's optimum is the optimum over all placements. A job's running placement
(``QueueEntry.keep``) is one more option at its kept utility. The DP's rule that a job moves off
a free kept placement only for a large enough speed-up (``move_min_rate``) is a filter on the
DP's search, not part of the problem, and is not imposed here.

An option across nodes must use at least two nodes (at most W-1 GPUs on any one): measured
unconsolidated rates are sometimes above consolidated ones, so a gang on one node must be valued
at its consolidated rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from primal_dual.dp import CandidateCache, QueueEntry
from primal_dual.find_alloc import Candidate, _make


@dataclass(frozen=True)
class ExactResult:
    chosen: tuple[tuple[int, Candidate, float], ...]
    """(entry index, placement, payoff) in queue order."""
    total_payoff: float


@dataclass(frozen=True)
class _Option:
    job: int
    cells: np.ndarray  # flat cell indices this option may use
    utility: float
    hold: float
    kept: np.ndarray | None = None  # a fixed placement (the job's running one)
    multi: bool = False  # must span at least two nodes
    gang: int = 0


def round_optimum(
    entries: Sequence[QueueEntry],
    free: np.ndarray,
    cache: CandidateCache,
    time_limit_s: float | None = None,
) -> ExactResult:
    """The best total payoff over every feasible choice of placements for ``entries`` on ``free``.

    ``cache`` must have fixed prices (its ``fixed`` prices, or none): state-dependent prices
    (Eq. 5) make the payoff of a placement depend on the others, which this ILP does not model.
    Raises ``ValueError`` for those, and ``RuntimeError`` when HiGHS finds no optimum in time."""
    if cache.bounds is not None and cache.fixed is None:
        raise ValueError("the exact solver needs fixed prices (price_model 'lp' or 'none')")
    price = cache.prices(free)
    shape = free.shape
    flat_free = free.ravel()
    flat_price = np.where(flat_free > 0, price.ravel(), 0.0)
    options = [o for j, e in enumerate(entries) for o in _options(j, e, free)]
    if not options:
        return ExactResult((), 0.0)
    # variables: one binary z per option, then its integer GPU counts x per allowed cell
    n_opt = len(options)
    x_owner: list[int] = []
    x_cell: list[int] = []
    for o_idx, o in enumerate(options):
        x_owner += [o_idx] * o.cells.size
        x_cell += o.cells.tolist()
    owner = np.array(x_owner, dtype=np.int64)
    cell = np.array(x_cell, dtype=np.int64)
    n_x = cell.size
    util = np.array([o.utility for o in options])
    hold = np.array([o.hold for o in options])
    gang = np.array([entries[o.job].request.num_gpus for o in options], dtype=float)
    objective = np.concatenate([util, hold[owner] * flat_price[cell]])  # maximise z.u - x.p.hold
    objective[n_opt:] *= -1.0
    rows, cols, data = [], [], []
    # (1) at most one option per job
    job_of = np.array([o.job for o in options])
    rows.append(job_of)
    cols.append(np.arange(n_opt))
    data.append(np.ones(n_opt))
    n_jobs = len(entries)
    # (2) an option's GPUs: sum x = W z (as two rows' worth: sum x - W z == 0)
    link = n_jobs + np.arange(n_opt)
    rows += [link, n_jobs + owner]
    cols += [np.arange(n_opt), n_opt + np.arange(n_x)]
    data += [-gang, np.ones(n_x)]
    # (3) capacity per cell
    cap_row = n_jobs + n_opt + cell
    rows.append(cap_row)
    cols.append(n_opt + np.arange(n_x))
    data.append(np.ones(n_x))
    n_rows = n_jobs + n_opt + flat_free.size
    a = sparse.csr_matrix(
        (np.concatenate(data), (np.concatenate(rows), np.concatenate(cols))),
        shape=(n_rows, n_opt + n_x),
    )
    lo = np.concatenate(
        [np.full(n_jobs, -np.inf), np.zeros(n_opt), np.full(flat_free.size, -np.inf)]
    )
    hi = np.concatenate([np.ones(n_jobs), np.zeros(n_opt), flat_free.astype(float)])
    ub_x = flat_free[cell].astype(float)
    kept_x = np.array([options[o].kept is not None for o in owner], dtype=bool)
    lb = np.zeros(n_opt + n_x)
    ub = np.concatenate([np.ones(n_opt), ub_x])
    if kept_x.any():  # a kept option's counts are fixed: x = keep * z (so x lies in [0, keep])
        keep_counts = np.array(
            [options[owner[i]].kept.ravel()[cell[i]] if kept_x[i] else 0 for i in range(n_x)],
            dtype=float,
        )
        ub[n_opt:][kept_x] = keep_counts[kept_x]
    constraints = [LinearConstraint(a, lo, hi)]
    spread = _spread_rows(options, owner, cell, n_opt, shape[1])
    if spread is not None:
        constraints.append(spread)
    if kept_x.any():
        # x_i - keep_i z = 0 for each kept cell
        k_idx = np.flatnonzero(kept_x)
        kc = sparse.csr_matrix(
            (
                np.concatenate([np.ones(k_idx.size), -ub[n_opt:][k_idx]]),
                (
                    np.concatenate([np.arange(k_idx.size)] * 2),
                    np.concatenate([n_opt + k_idx, owner[k_idx]]),
                ),
            ),
            shape=(k_idx.size, n_opt + n_x),
        )
        constraints.append(LinearConstraint(kc, 0.0, 0.0))
    options_ = {"time_limit": time_limit_s} if time_limit_s is not None else {}
    res = milp(
        -objective,
        constraints=constraints,
        integrality=np.ones(n_opt + n_x),
        bounds=Bounds(lb, ub),
        options=options_,
    )
    if res.status != 0 or res.x is None:
        raise RuntimeError(f"HiGHS found no optimal round plan: {res.message}")
    z = np.round(res.x[:n_opt]).astype(np.int64)
    xs = np.round(res.x[n_opt:]).astype(np.int64)
    chosen = []
    for o_idx in np.flatnonzero(z).tolist():
        o = options[o_idx]
        alloc = np.zeros(flat_free.size, dtype=np.int64)
        mine = owner == o_idx
        np.add.at(alloc, cell[mine], xs[mine])
        cand = _make(alloc.reshape(shape), entries[o.job].request, price, kept=o.kept is not None)
        if cand is None or entries[o.job].payoff(cand) <= 0:
            continue
        chosen.append((o.job, cand, entries[o.job].payoff(cand)))
    chosen.sort(key=lambda t: t[0])
    return ExactResult(tuple(chosen), float(sum(p for _, _, p in chosen)))


def _spread_rows(
    options: list[_Option], owner: np.ndarray, cell: np.ndarray, n_opt: int, n_types: int
) -> LinearConstraint | None:
    """Per option across nodes and node h: sum_k x[h, k] - (W - 1) z <= 0."""
    rows, cols, data = [], [], []
    n_x = cell.size
    row = 0
    node = cell // n_types
    for o_idx, o in enumerate(options):
        if not o.multi:
            continue
        mine = np.flatnonzero(owner == o_idx)
        w = round(o.gang)
        for h in np.unique(node[mine]):
            xs = mine[node[mine] == h]
            rows += [row] * (xs.size + 1)
            cols += [*(n_opt + xs).tolist(), o_idx]
            data += [1.0] * xs.size + [-(w - 1.0)]
            row += 1
    if row == 0:
        return None
    a = sparse.csr_matrix((data, (rows, cols)), shape=(row, n_opt + n_x))
    return LinearConstraint(a, -np.inf, 0.0)


def _options(j: int, entry: QueueEntry, free: np.ndarray) -> list[_Option]:
    req = entry.request
    w = req.num_gpus
    cons, unc = req.rates_cons, req.rates_unc
    usable = free > 0
    out: list[_Option] = []
    if int(free[usable & (cons > 0)].sum()) < w:
        return out
    n_types = free.shape[1]
    for h in range(free.shape[0]):  # consolidated on node h, bottleneck >= level
        for level in np.unique(cons[h][usable[h] & (cons[h] > 0)]):
            ks = np.flatnonzero(usable[h] & (cons[h] >= level))
            if int(free[h, ks].sum()) >= w:
                out.append(
                    _Option(
                        j,
                        h * n_types + ks,
                        entry.utility(float(level)),
                        entry.hold_rounds(float(level)),
                    )
                )
    for level in np.unique(unc[usable & (unc > 0)]):  # across nodes, bottleneck >= level
        ok = usable & (unc >= level)
        if w >= 2 and int(free[ok].sum()) >= w and int(ok.any(axis=1).sum()) >= 2:
            out.append(
                _Option(
                    j,
                    np.flatnonzero(ok.ravel()),
                    entry.utility(float(level)),
                    entry.hold_rounds(float(level)),
                    multi=True,
                    gang=w,
                )
            )
    if entry.keep is not None and (entry.keep <= free).all() and entry.keep.sum() == w:
        used = entry.keep > 0
        nodes = int(used.any(axis=1).sum())
        rate = float((cons if nodes == 1 else unc)[used].min())
        if rate > 0:
            ku = entry.kept_utility(rate) if entry.kept_utility is not None else entry.utility(rate)
            out.append(
                _Option(
                    j, np.flatnonzero(used.ravel()), ku, entry.hold_rounds(rate), kept=entry.keep
                )
            )
    return out
