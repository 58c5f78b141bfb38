"""A job's reference rates on a cluster, for metrics and policies (pure functions of rate arrays).

* best achievable rate: the fastest placement the cluster can give the gang when empty;
* equal-share rate: the job's rate when its time is spread over the GPU types in proportion to
  their GPU counts (Gavel's ``T_equal``, the building block of a "1/n share of the cluster").
"""

from __future__ import annotations

import numpy as np


def best_achievable_rate(
    rates_cons: np.ndarray, rates_unc: np.ndarray, capacity: np.ndarray, w: int
) -> float:
    """Steps/s of the gang's fastest placement: consolidated on a node holding W GPUs of one type,
    or across nodes (the unconsolidated rate) on a type with W GPUs in all; 0 if none exists."""
    cons = np.where(capacity >= w, rates_cons, 0.0)
    best = float(cons.max(initial=0.0))
    enough = capacity.sum(axis=0) >= w
    unc = np.where((capacity > 0) & enough[None, :], rates_unc, 0.0)
    return max(best, float(unc.max(initial=0.0)))


def best_rate_per_type(
    rates_cons: np.ndarray, rates_unc: np.ndarray, capacity: np.ndarray, w: int
) -> np.ndarray:
    """Per GPU type, the gang's fastest rate on that type alone: consolidated on a node with W of
    them, else across nodes when the type has W in all; 0 where the type cannot hold the gang.
    Rates stacked as ``[..., node, gpu type]`` give ``[..., gpu type]``."""
    cons = np.where(capacity >= w, rates_cons, 0.0).max(axis=-2, initial=0.0)
    unc = np.where(capacity > 0, rates_unc, 0.0).max(axis=-2, initial=0.0)
    unc = np.where(capacity.sum(axis=0) >= w, unc, 0.0)
    return np.asarray(np.where(cons > 0, cons, unc))


def equal_share_rate(rates_cons: np.ndarray, capacity: np.ndarray) -> float:
    """``sum_k count_k / G * X_k``: the W-GPU rate with time split over types by GPU count
    (``X_k`` the best consolidated rate on type k, 0 where the job cannot run)."""
    counts = capacity.sum(axis=0).astype(float)
    total = counts.sum()
    if total <= 0:
        return 0.0
    per_type = np.where(capacity > 0, rates_cons, 0.0).max(axis=0)
    return float((counts * per_type).sum() / total)


def fair_share_jct(
    total_steps: float, equal_rate: float, num_gpus: int, total_gpus: int, contention: float
) -> float:
    """Themis's (and Gavel's finish-time fairness) reference JCT: the job's JCT with an equal
    ``1/n`` share of the cluster, ``n = contention`` jobs (itself included). The share is
    ``G/n`` GPUs split over the types by GPU count, on which a gang of W runs at its equal-share
    rate for a fraction ``min(1, G / (n W))`` of the time; inf when the job cannot run."""
    if equal_rate <= 0 or total_gpus <= 0:
        return float("inf")
    share = min(1.0, total_gpus / (max(1.0, contention) * num_gpus))
    return total_steps / (equal_rate * share)
