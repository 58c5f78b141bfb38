"""Sia's allocation ILP (Jayaram Subramanya et al., SOSP 2023, section 3.4), solved with HiGHS
through scipy (imported when solving: listing the policies imports no solver).

A *configuration* is (GPU type, nodes, GPUs): 1, 2, 4, ... GPUs on one node up to the node size,
then whole nodes of that type. Every job gets at most one configuration, so it never spans GPU
types. With ``x[j, c]`` binary:

    minimise  sum_jc cost[j, c] x[j, c]
    s.t.      sum_c x[j, c] <= 1                          for every job j
              sum_j sum_{c of type t} gpus[c] x[j, c] <= capacity[t]   for every GPU type t

The policy builds ``cost`` from Sia's objective (:func:`objective`): ``A[j, c] = G[j, c] ** p``
with ``p < 0`` (the goodput of the configuration normalised by the job's smallest goodput,
re-allocations discounted by the restart factor), ``lambda_n`` per job left without GPUs and
``lambda_a`` per configuration changed from last round's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hadar.core.native_output import drop_solver_debug_lines


@dataclass(frozen=True)
class Configuration:
    """One allocation shape: ``gpus`` GPUs of type index ``gpu_type`` on ``nodes`` nodes."""

    gpu_type: int
    nodes: int
    gpus: int


def configurations(node_sizes: list[int], node_counts: list[int]) -> tuple[Configuration, ...]:
    """Sia's configurations per GPU type: powers of two on one node up to ``node_sizes[t]``
    GPUs (and the node size itself), then 2, 3, ... whole nodes up to ``node_counts[t]``."""
    out: list[Configuration] = []
    for t, (size, count) in enumerate(zip(node_sizes, node_counts, strict=True)):
        if size <= 0 or count <= 0:
            continue
        k = 1
        singles = []
        while k < size:
            singles.append(k)
            k *= 2
        singles.append(size)
        out.extend(Configuration(t, 1, k) for k in singles)
        out.extend(Configuration(t, n, n * size) for n in range(2, count + 1))
    return tuple(out)


def objective(
    goodput: np.ndarray,
    current: np.ndarray,
    factor: np.ndarray,
    p: float,
    lambda_n: float,
    lambda_a: float,
) -> np.ndarray:
    """``cost[j, c]`` to minimise (inf: not allowed) from ``goodput[j, c]`` (0 or NaN: not
    allowed), ``current[j, c]`` (True for the configuration the job holds) and the restart
    ``factor[j]`` applied to every other configuration of a job that holds one.

    Goodputs are normalised per job by its smallest allowed goodput (so every job's values start
    at 1 and jobs compare by speedup), raised to ``p`` (< 0: a convex fairness penalty, Sia's
    -0.5), minus ``lambda_n`` for being allocated at all, plus ``lambda_a`` for moving away from
    the current configuration (the constant of ``|x - prev|`` dropped)."""
    if not p < 0:
        raise ValueError(f"p must be negative (Sia minimises G**p), got {p}")
    g = np.where(np.isfinite(goodput), goodput, 0.0)
    allowed = g > 0
    cost = np.full(g.shape, np.inf)
    holds = np.asarray(np.asarray(current, dtype=bool).any(axis=1), dtype=bool).reshape(-1)
    for j in range(g.shape[0]):
        if not allowed[j].any():
            continue
        norm = g[j] / g[j][allowed[j]].min()
        if holds[j]:
            norm = np.where(current[j], norm, norm * factor[j])
        ok = allowed[j] & (norm > 0)
        change = np.where(current[j], -1.0, 1.0) if holds[j] else np.zeros(g.shape[1])
        cost[j, ok] = norm[ok] ** p - lambda_n + lambda_a * change[ok]
    return cost


def solve(cost: np.ndarray, configs: tuple[Configuration, ...], capacity: np.ndarray) -> np.ndarray:
    """Per job, the index of its configuration in the optimum (-1: none). ``capacity[t]``: GPUs
    of type t available."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    jobs, cols = np.nonzero(np.isfinite(cost))
    out = np.full(cost.shape[0], -1, dtype=np.int64)
    if jobs.size == 0:
        return out
    c = cost[jobs, cols]
    gpus = np.array([configs[k].gpus for k in cols], dtype=float)
    ctype = np.array([configs[k].gpu_type for k in cols])
    n = jobs.size
    var = np.arange(n)
    one = coo_matrix((np.ones(n), (jobs, var)), shape=(cost.shape[0], n))
    per_type = coo_matrix((gpus, (ctype, var)), shape=(len(capacity), n))
    constraints = [
        LinearConstraint(one.tocsr(), -np.inf, 1.0),
        LinearConstraint(per_type.tocsr(), -np.inf, np.asarray(capacity, dtype=float)),
    ]
    with drop_solver_debug_lines():  # HiGHS prints a debug line in some solves (the module's doc)
        res = milp(
            c,
            constraints=constraints,
            integrality=np.ones(n),
            bounds=Bounds(0.0, 1.0),
            options={"presolve": True},
        )
    if res.x is None:  # cannot happen (x = 0 is feasible); never place on a failed solve
        return out
    chosen = np.flatnonzero(np.asarray(res.x) > 0.5)
    out[jobs[chosen]] = cols[chosen]
    return out
