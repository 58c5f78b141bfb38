"""PolluxSched's objective (Pollux §4.2): FITNESS_p, SPEEDUP over a fair share, REALLOC_FACTOR.

FITNESS_p(A) = (1/J · Σ_j SPEEDUP_j(A_j)^p)^(1/p)   (Eq. 14; p = 0 is the geometric mean)

SPEEDUP_j = best goodput with A_j / best goodput with a fair share (an exclusive 1/J of the
cluster, Eq. 15), multiplied by REALLOC_FACTOR_j(δ) = (T_j − R_j·δ) / (T_j + δ) when A_j differs
from the job's current allocation (T_j: age, R_j: re-allocations so far, δ = 30 s; clamped at 0).

A job left without GPUs has speedup 0, which makes FITNESS_p 0 for any p ≤ 0 whatever the others
get; like Pollux's own implementation we add ``eps`` = 1e-3 to every speedup, so an allocation
that leaves fewer jobs without GPUs always ranks higher, and ties among those are decided by the
others' speedups.
"""

from __future__ import annotations

import math

import numpy as np

DEFAULT_P = -1.0
"""The fairness knob (Pollux's default: the harmonic mean of speedups)."""
DEFAULT_DELTA_S = 30.0
"""δ: the re-allocation delay PolluxSched assumes, in seconds."""
SPEEDUP_EPS = 1e-3
"""Added to every speedup before the generalised mean (see the module docstring)."""


def realloc_factor(
    age_s: np.ndarray | float, restarts: np.ndarray | float, delta_s: float = DEFAULT_DELTA_S
) -> np.ndarray:
    """REALLOC_FACTOR(δ) = max(T − R·δ, 0) / (T + δ), elementwise (a new job, T = 0, gets 0);
    with δ = 0 a re-allocation costs nothing, and a new job's 0 / 0 is 1."""
    age = np.asarray(age_s, dtype=float)
    kept = np.maximum(age - np.asarray(restarts, dtype=float) * delta_s, 0.0)
    whole = age + delta_s
    out: np.ndarray = np.divide(kept, whole, out=np.ones_like(whole), where=whole > 0)
    return out


def utility(speedup: np.ndarray, p: float = DEFAULT_P, eps: float = SPEEDUP_EPS) -> np.ndarray:
    """Per-job terms whose sum FITNESS_p increases with: −(s+ε)^p for p < 0, log(s+ε) for p = 0,
    (s+ε)^p for p > 0. Maximising Σ utility maximises FITNESS_p (the mean is monotone in it)."""
    s = np.asarray(speedup, dtype=float) + eps
    if p < 0:
        return -(s**p)
    if p == 0:
        return np.log(s)
    return s**p


def power_mean(
    speedup: np.ndarray, p: float = DEFAULT_P, eps: float = SPEEDUP_EPS
) -> np.ndarray | float:
    """FITNESS_p over the last axis (jobs): the generalised mean of ``speedup + eps`` (a
    ``numpy.float64`` for one row of speedups)."""
    s = np.asarray(speedup, dtype=float) + eps
    mean: np.ndarray | float = (
        np.exp(np.mean(np.log(s), axis=-1)) if p == 0 else np.mean(s**p, axis=-1) ** (1.0 / p)
    )
    return mean


def fitness_from_utility(total_utility: float, num_jobs: int, p: float = DEFAULT_P) -> float:
    """FITNESS_p from Σ utility over ``num_jobs`` jobs (the inverse of :func:`utility`)."""
    mean = total_utility / num_jobs
    if p < 0:
        return float((-mean) ** (1.0 / p))
    if p == 0:
        return float(math.exp(mean))
    return float(mean ** (1.0 / p))


def fair_share_gpus(total_gpus: int, num_jobs: int) -> int:
    """GPUs in an exclusive 1/J share of the cluster, rounded up (at least 1)."""
    return max(1, math.ceil(total_gpus / max(num_jobs, 1)))
