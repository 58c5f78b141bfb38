"""One PolluxSched round as arrays: who may get which GPUs, what each choice is worth, and checks.

An allocation is a ``[job, node, type]`` count array. A job runs on one GPU type (Pollux is
homogeneous; on mixed clusters each job is placed on one type, as in Sia's evaluation). Its
speedup depends on how many GPUs it gets and whether they span more than one node (Pollux's
throughput model distinguishes only co-located and distributed placements, Eq. 9):
``local[j, t, K]`` and ``spread[j, t, K]`` (NaN where not allowed, e.g. K above the job's limit).

Two placement rules, checked here and kept by every solver:
- interference avoidance (§4.2): at most one distributed job (one spanning several nodes) per node;
- no needless split: a job spans the fewest nodes its GPU count allows, ``ceil(K / node size)``
  (splitting further only slows its synchronisation and blocks nodes for other distributed jobs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pollux.fitness import DEFAULT_P, SPEEDUP_EPS, power_mean, utility


@dataclass(frozen=True)
class AllocationProblem:
    """PolluxSched's search space and objective for one round (arrays, read-only by convention)."""

    capacity: np.ndarray
    """``[node, type]`` GPUs available."""
    local: np.ndarray
    """``[job, type, K]`` speedup over the fair share with K GPUs on one node (NaN: not allowed)."""
    spread: np.ndarray
    """``[job, type, K]`` speedup with K GPUs spanning several nodes (NaN: not allowed)."""
    current: np.ndarray
    """``[job, node, type]`` the allocation the jobs hold now (zeros for waiting jobs)."""
    factor: np.ndarray
    """``[job]`` REALLOC_FACTOR: the speedup multiplier of any allocation other than the current."""
    p: float = DEFAULT_P
    eps: float = SPEEDUP_EPS

    @property
    def num_jobs(self) -> int:
        return int(self.local.shape[0])

    @property
    def max_k(self) -> int:
        return int(self.local.shape[2]) - 1

    @property
    def node_size(self) -> np.ndarray:
        """``[type]`` the most GPUs of that type on one node."""
        most: np.ndarray = self.capacity.max(axis=0)
        return most


def job_counts(alloc: np.ndarray) -> np.ndarray:
    """``[..., job]`` GPUs per job."""
    counts: np.ndarray = alloc.sum(axis=(-2, -1))
    return counts


def nodes_used(alloc: np.ndarray) -> np.ndarray:
    """``[..., job]`` nodes on which a job holds at least one GPU."""
    used: np.ndarray = np.count_nonzero(alloc.sum(axis=-1), axis=-1)
    return used


def speedups(problem: AllocationProblem, alloc: np.ndarray) -> np.ndarray:
    """``[..., job]`` SPEEDUP of each job under ``alloc`` (``[..., job, node, type]``), with the
    re-allocation factor applied to changed allocations; 0 for no GPUs or a disallowed choice."""
    k = job_counts(alloc)
    per_type = alloc.sum(axis=-2)  # [..., job, type]
    gtype = per_type.argmax(axis=-1)
    one_type = np.count_nonzero(per_type, axis=-1) <= 1
    kc = np.minimum(k, problem.max_k)
    jobs = np.broadcast_to(np.arange(problem.num_jobs), k.shape)
    table = np.where(
        nodes_used(alloc) > 1, problem.spread[jobs, gtype, kc], problem.local[jobs, gtype, kc]
    )
    ok = one_type & (k <= problem.max_k) & np.isfinite(table) & (k > 0)
    s = np.where(ok, np.nan_to_num(table), 0.0)
    changed = np.any(alloc != problem.current, axis=(-2, -1))
    return np.where(changed, s * problem.factor, s)


def fitness(problem: AllocationProblem, alloc: np.ndarray) -> np.ndarray | float:
    """FITNESS_p of ``alloc`` (a scalar, or one per leading index of a population)."""
    return power_mean(speedups(problem, alloc), problem.p, problem.eps)


def total_utility(problem: AllocationProblem, alloc: np.ndarray) -> np.ndarray | float:
    """Σ_j utility(SPEEDUP_j): what the solvers maximise (monotone in FITNESS_p; a
    ``numpy.float64`` for one allocation)."""
    terms = utility(speedups(problem, alloc), problem.p, problem.eps)
    total: np.ndarray | float = terms.sum(axis=-1)
    return total


def violations(problem: AllocationProblem, alloc: np.ndarray) -> list[str]:
    """Why ``alloc`` breaks a rule (capacity, one type, limits, interference, needless split)."""
    out: list[str] = []
    used = alloc.sum(axis=0)
    if np.any(alloc < 0) or np.any(used > problem.capacity):
        out.append("capacity exceeded")
    k = job_counts(alloc)
    per_type = alloc.sum(axis=1)
    span = nodes_used(alloc)
    for j in np.flatnonzero(k):
        types = np.flatnonzero(per_type[j])
        if len(types) > 1:
            out.append(f"job {j} spans GPU types")
            continue
        t = int(types[0])
        table = problem.spread if span[j] > 1 else problem.local
        if k[j] > problem.max_k or not np.isfinite(table[j, t, k[j]]):
            out.append(f"job {j}: {k[j]} GPUs not allowed")
        if span[j] > -(-int(k[j]) // int(problem.node_size[t])):
            out.append(f"job {j} split over {span[j]} nodes needlessly")
    distributed = span > 1
    per_node = np.count_nonzero(alloc[distributed].sum(axis=-1), axis=0)
    for n in np.flatnonzero(per_node > 1):
        out.append(f"node {n} shared by {per_node[n]} distributed jobs")
    return out
