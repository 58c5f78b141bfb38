"""Learning-rate scaling and gradient-noise estimates for batch sizes that change (Pollux §3.1,
Table 1; AdaScale, Johnson et al. 2020; McCandlish et al. 2018, App. A.1). Pure maths."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, Protocol

import numpy as np

from goodput.model import GradParams

LrRule = Literal["adascale", "sqrt", "linear", "none"]


def lr_factor(rule: LrRule, grad: GradParams | None, init_batch: int, batch: float) -> float:
    """Learning-rate multiplier for total batch ``batch`` (vs M0): AdaScale's gain
    r = (var + sqr) / (var / S + sqr) with S = M / M0, sqrt(S), S, or 1."""
    scale = batch / init_batch
    if rule == "sqrt":
        return math.sqrt(scale)
    if rule == "linear":
        return scale
    if rule == "none" or grad is None:
        return 1.0
    denom = grad.var / scale + grad.sqr
    return (grad.var + grad.sqr) / denom if denom > 0 else 1.0


def noise_from_replicas(
    replica_sqnorms: np.ndarray, mean_grad_sqnorm: float, local_bsz: int, init_batch: int
) -> GradParams:
    """Gradient statistics from K >= 2 replicas' local gradients (McCandlish et al., App. A.1):
    ``replica_sqnorms`` = |g_k|^2 at batch b each, ``mean_grad_sqnorm`` = |mean_k g_k|^2 at
    batch K·b. Unbiased |G|^2 and tr(Σ); returned per M0 as Pollux's GradParams (var = tr Σ / M0)."""
    k = len(replica_sqnorms)
    if k < 2:
        raise ValueError("need two replicas or more (one replica: noise_from_consecutive)")
    small, big = float(local_bsz), float(local_bsz * k)
    g_small = float(np.mean(replica_sqnorms))
    sqr = (big * mean_grad_sqnorm - small * g_small) / (big - small)
    trace = (g_small - mean_grad_sqnorm) / (1.0 / small - 1.0 / big)
    return GradParams(sqr=max(sqr, 0.0), var=max(trace, 0.0) / init_batch)


def noise_from_consecutive(
    prev_grad: np.ndarray, grad: np.ndarray, batch: int, init_batch: int
) -> GradParams:
    """One replica, no accumulation: the differenced estimator over consecutive gradients
    (Pollux §3.1): |g_t - g_{t-1}|^2 / 2 estimates tr(Σ)/B, and |G|^2 = g_t·g_{t-1} (the true
    gradient changing slowly between steps)."""
    return noise_from_differences(
        float(np.sum((grad - prev_grad) ** 2)),
        float(np.dot(grad.ravel(), prev_grad.ravel())),
        batch,
        init_batch,
    )


def noise_from_differences(
    diff_sqnorm: float, dot: float, batch: int, init_batch: int
) -> GradParams:
    """:func:`noise_from_consecutive` from its two sums, as a worker reports them (means over
    consecutive steps of |g_t - g_(t-1)|^2 and of g_t . g_(t-1))."""
    return GradParams(sqr=max(dot, 0.0), var=diff_sqnorm / 2.0 * batch / init_batch)


class MeasuredNorms(Protocol):
    """What a worker reports of a round's gradients (``estimators.iterations.IterationSample``)."""

    @property
    def num_replicas(self) -> int: ...
    @property
    def local_bsz(self) -> int: ...
    @property
    def replica_sqnorms(self) -> Sequence[float]: ...
    @property
    def mean_sqnorm(self) -> float | None: ...
    @property
    def diff_sqnorm(self) -> float | None: ...
    @property
    def dot(self) -> float | None: ...


def grad_of(norms: MeasuredNorms, init_batch: int) -> GradParams | None:
    """:func:`grad_from_norms` of a worker's report."""
    return grad_from_norms(
        norms.num_replicas,
        norms.local_bsz,
        init_batch,
        norms.replica_sqnorms,
        norms.mean_sqnorm,
        norms.diff_sqnorm,
        norms.dot,
    )


def grad_from_norms(
    num_replicas: int,
    local_bsz: int,
    init_batch: int,
    replica_sqnorms: Sequence[float] = (),
    mean_sqnorm: float | None = None,
    diff_sqnorm: float | None = None,
    dot: float | None = None,
) -> GradParams | None:
    """Gradient statistics from what a worker reports: per-replica norms with K >= 2 replicas,
    successive steps with one; None when the round measured neither."""
    if num_replicas >= 2 and len(replica_sqnorms) >= 2 and mean_sqnorm is not None:
        return noise_from_replicas(np.asarray(replica_sqnorms), mean_sqnorm, local_bsz, init_batch)
    if diff_sqnorm is not None and dot is not None:
        return noise_from_differences(diff_sqnorm, dot, local_bsz * num_replicas, init_batch)
    return None
