"""Placement helpers shared by the baselines: W GPUs on as few nodes as possible.

Both helpers go through FIND_ALLOC's candidate builder (``primal_dual.find_alloc``) with a
0/1 "rate" marking the GPUs a policy may use, and pick the candidate spanning the fewest nodes:
one node when some node has W eligible free GPUs, otherwise the nodes with the most eligible
free GPUs first. Prices are used only as tie-breaks between nodes.
"""

from __future__ import annotations

import numpy as np

from estimators.throughput import ThroughputModel
from hadar.core.cluster import Cluster
from hadar.core.jobs import Job
from primal_dual.find_alloc import JobRequest, candidate_allocations


def fewest_nodes(
    free: np.ndarray, eligible: np.ndarray, w: int, node_cost: np.ndarray | None = None
) -> np.ndarray | None:
    """A ``[node, type]`` allocation of ``w`` eligible free GPUs on the fewest nodes, or None.

    ``node_cost[h]`` orders nodes that tie (lowest first; default: node order).
    """
    mask = eligible & (free > 0)
    if int(free[mask].sum()) < w:
        return None
    rates = mask.astype(float)
    cost = np.zeros(free.shape[0]) if node_cost is None else np.asarray(node_cost, dtype=float)
    price = np.repeat(cost[:, None], free.shape[1], axis=1)
    cands = candidate_allocations(JobRequest(w, rates, rates), np.where(mask, free, 0), price)
    if not cands:
        return None
    return min(cands, key=lambda c: (c.nodes, c.unit_cost)).alloc


def best_fit_costs(free: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Node costs for best fit: fewest free GPUs first, then ``rank`` (a fixed node order)."""
    costs: np.ndarray = free.sum(axis=1) * (len(rank) + 1.0) + rank
    return costs


def check_seed(seed: int) -> None:
    """A node tie-break seed (a policy's ``seed`` knob) is a non-negative integer, as numpy's
    generators take it: a ValueError otherwise, which ``--policy-opt`` reports as one line."""
    if seed < 0:
        raise ValueError(f"seed must be >= 0 (got {seed})")


def node_rank(num_nodes: int, seed: int) -> np.ndarray:
    """A fixed pseudo-random rank per node (tie-break that ignores how the cluster file is ordered)."""
    rank = np.empty(num_nodes)
    rank[np.random.default_rng(seed).permutation(num_nodes)] = np.arange(num_nodes)
    return rank


def runnable_cells(job: Job, cluster: Cluster, throughput: ThroughputModel) -> np.ndarray:
    """``[node, type]`` cells where ``job`` can run at all (positive rate on one node and across
    nodes). Feasibility, not preference: e.g. ResNet-50 at batch 128 on 2+ K80s has rate 0."""
    cons, unc = throughput.cell_rates(job, cluster)
    return (cluster.capacity > 0) & (cons > 0) & (unc > 0)


def unaware_placement(
    free: np.ndarray, runnable: np.ndarray, w: int, rank: np.ndarray
) -> np.ndarray | None:
    """Heterogeneity-unaware placement: any W free GPUs the job can run on (types alike otherwise),
    consolidated when possible, best-fit node first, ``rank`` breaking ties."""
    return fewest_nodes(free, runnable, w, best_fit_costs(free, rank))
