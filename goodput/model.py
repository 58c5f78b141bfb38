"""Pollux's goodput model (Qiao et al., OSDI'21, section 3): throughput x statistical efficiency.

Pure numpy functions over scalars or arrays (they broadcast), plus two value objects:

- ``PerfParams``: the seven parameters of the iteration-time model, Eq. 8-11;
- ``GradParams``: the gradient statistics behind the (pre-conditioned) gradient noise scale, Eq. 5;
- ``GoodputModel``: both, with the initial batch size M0, predicting throughput (Eq. 7),
  efficiency (Eq. 6) and goodput (Eq. 4), and choosing the batch size that maximises goodput.

Units: times in seconds per iteration, batch sizes in samples, throughput in samples per second,
goodput in samples *at the initial batch size* per second (throughput x efficiency).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

_EPS = 1e-8  # tolerance for ceil/floor of batch-size ratios
BATCH_CANDIDATES = 50
"""Total batch sizes a batch search tries (a geometric grid): ``GoodputModel.optimize`` per
placement, Hadar per elastic job (``hadar.scheduler.elastic.batch_choices``)."""

Array = NDArray[np.float64]


@dataclass(frozen=True)
class PerfParams:
    """Iteration-time parameters (Pollux Eq. 8-11).

    ``alpha_c + beta_c * m``: compute time of one forward/backward pass at local batch ``m``;
    ``alpha_r + beta_r * (K - 2)``: synchronisation time when all ``K`` replicas share a node;
    ``alpha_n + beta_n * (K - 2)``: synchronisation time when they span two nodes or more;
    ``gamma`` (>= 1): overlap of compute and synchronisation (1: none, large: perfect).
    """

    alpha_c: float
    beta_c: float
    alpha_n: float
    beta_n: float
    alpha_r: float
    beta_r: float
    gamma: float

    def as_array(self) -> Array:
        """The parameters in declaration order."""
        return np.array(
            [
                self.alpha_c,
                self.beta_c,
                self.alpha_n,
                self.beta_n,
                self.alpha_r,
                self.beta_r,
                self.gamma,
            ],
            dtype=float,
        )


@dataclass(frozen=True)
class GradParams:
    """Gradient statistics: ``sqr`` = |g|^2 and ``var`` = tr(Sigma) per sample, both measured at
    the initial batch size M0, so the noise scale is phi = M0 * var / sqr (Pollux Eq. 5)."""

    sqr: float
    var: float

    def noise_scale(self, init_batch_size: float) -> float:
        """The (pre-conditioned) gradient noise scale phi in samples; inf when ``sqr <= 0``."""
        if self.sqr <= 0:
            return float("inf")
        return init_batch_size * self.var / self.sqr


def compute_time(perf: PerfParams, local_bsz: ArrayLike) -> Array:
    """T_grad(m) = alpha_c + beta_c * m (Pollux Eq. 8): one forward/backward pass."""
    return perf.alpha_c + perf.beta_c * np.asarray(local_bsz, dtype=float)


def sync_time(perf: PerfParams, num_nodes: ArrayLike, num_replicas: ArrayLike) -> Array:
    """T_sync (Pollux Eq. 9): 0 for one replica, the intra-node (r) parameters when all replicas
    share one node, the inter-node (n) parameters otherwise; linear in K - 2 (K replicas)."""
    nodes = np.asarray(num_nodes, dtype=float)
    replicas = np.asarray(num_replicas, dtype=float)
    retro = np.maximum(replicas - 2.0, 0.0)
    intra = perf.alpha_r + perf.beta_r * retro
    inter = perf.alpha_n + perf.beta_n * retro
    result: Array = np.where(replicas <= 1, 0.0, np.where(nodes > 1, inter, intra))
    return result


def overlapped_time(t_compute: ArrayLike, t_sync: ArrayLike, gamma: float) -> Array:
    """(T_grad^gamma + T_sync^gamma)^(1/gamma) (Pollux Eq. 10): one synchronising pass."""
    c = np.asarray(t_compute, dtype=float)
    s = np.asarray(t_sync, dtype=float)
    result: Array = (c**gamma + s**gamma) ** (1.0 / gamma)
    return result


def step_time(
    perf: PerfParams,
    num_nodes: ArrayLike,
    num_replicas: ArrayLike,
    local_bsz: ArrayLike,
    accum_steps: ArrayLike = 0,
) -> Array:
    """T_iter (Pollux Eq. 11): ``accum_steps`` local passes plus one pass overlapped with the
    synchronisation; ``local_bsz`` is the batch of one pass on one GPU (the atomic batch)."""
    t_compute = compute_time(perf, local_bsz)
    t_sync = sync_time(perf, num_nodes, num_replicas)
    accum = np.asarray(accum_steps, dtype=float)
    return accum * t_compute + overlapped_time(t_compute, t_sync, perf.gamma)


def statistical_efficiency(
    grad: GradParams, init_batch_size: float, batch_size: ArrayLike
) -> Array:
    """EFFICIENCY(M) = (phi + M0) / (phi + M) (Pollux Eq. 6), written with sqr/var so that
    ``sqr <= 0`` (no measurable signal, phi = inf) gives 1. It is 1 at M = M0 and decreases in M;
    Pollux only uses M >= M0."""
    if isinstance(batch_size, int | float) and isinstance(grad.sqr, float | int):
        # one batch (a trace's rate query): the same arithmetic on Python floats, without the
        # array machinery that was most of the call's cost
        one = float(batch_size) / float(init_batch_size)
        var, sqr = float(grad.var), float(grad.sqr)
        below = var + sqr * one
        return np.asarray((var + sqr) / below if sqr > 0 and below > 0 else 1.0)
    scale = np.asarray(batch_size, dtype=float) / float(init_batch_size)
    denom = grad.var + grad.sqr * scale
    numer = grad.var + grad.sqr
    safe = np.where(denom > 0, denom, 1.0)
    result: Array = np.where((grad.sqr > 0) & (denom > 0), numer / safe, 1.0)
    return result


class BatchChoice(NamedTuple):
    """The result of ``GoodputModel.optimize`` (unpacks as ``goodput, local_bsz, accum_steps``):
    per placement, the best goodput, the local (atomic) batch size of one pass and the number of
    accumulation steps (0: none); shaped like the broadcast placements (0-d for scalars)."""

    goodput: Array
    local_bsz: NDArray[np.int64]
    accum_steps: NDArray[np.int64]


@dataclass(frozen=True)
class GoodputModel:
    """A job's goodput model: its iteration-time parameters, its current gradient statistics and
    its initial batch size M0."""

    perf: PerfParams
    grad: GradParams
    init_batch_size: int

    def throughput(
        self,
        num_nodes: ArrayLike,
        num_replicas: ArrayLike,
        local_bsz: ArrayLike,
        accum_steps: ArrayLike = 0,
    ) -> Array:
        """Samples per second (Pollux Eq. 7): M / T_iter with M = K * m * (s + 1)."""
        batch = total_batch_size(num_replicas, local_bsz, accum_steps)
        return batch / step_time(self.perf, num_nodes, num_replicas, local_bsz, accum_steps)

    def efficiency(self, batch_size: ArrayLike) -> Array:
        """Statistical efficiency of total batch ``batch_size`` relative to M0 (Eq. 6)."""
        return statistical_efficiency(self.grad, self.init_batch_size, batch_size)

    def goodput(
        self,
        num_nodes: ArrayLike,
        num_replicas: ArrayLike,
        local_bsz: ArrayLike,
        accum_steps: ArrayLike = 0,
    ) -> Array:
        """Throughput x efficiency (Pollux Eq. 4): samples at M0 per second."""
        batch = total_batch_size(num_replicas, local_bsz, accum_steps)
        return self.throughput(num_nodes, num_replicas, local_bsz, accum_steps) * self.efficiency(
            batch
        )

    def optimize(
        self,
        num_nodes: ArrayLike,
        num_replicas: ArrayLike,
        max_batch_size: int | None = None,
        local_bsz_bounds: tuple[int, int] | None = None,
        accumulation: bool = False,
    ) -> BatchChoice:
        """The batch size maximising goodput for each placement (``num_nodes``/``num_replicas``
        broadcast together), searched over a geometric grid of total batch sizes from
        max(M0, K * min local batch) to ``max_batch_size`` (default M0).

        With ``accumulation``, a local batch above the largest local batch is split into
        passes; one replica above M0 accumulates at least once (Pollux estimates the gradient
        statistics from the passes). Configurations whose local batch falls outside
        ``local_bsz_bounds`` score 0 (goodput 0 and local batch 0 when none is valid).
        """
        m0 = float(self.init_batch_size)
        max_bsz = m0 if max_batch_size is None else float(max_batch_size)
        if max_bsz < m0:
            raise ValueError(f"max_batch_size {max_bsz:g} is below the initial batch size {m0:g}")
        lo, hi = local_bsz_bounds if local_bsz_bounds is not None else (1, int(max_bsz))
        nodes_b, replicas_b = np.broadcast_arrays(
            np.asarray(num_nodes, dtype=float), np.asarray(num_replicas, dtype=float)
        )
        shape = nodes_b.shape
        nodes = nodes_b.reshape(-1)
        replicas = replicas_b.reshape(-1)
        if np.any(nodes < 1) or np.any(replicas < nodes):
            raise ValueError("each placement needs 1 <= num_nodes <= num_replicas")
        top = (
            np.full_like(replicas, max_bsz) if accumulation else np.minimum(max_bsz, hi * replicas)
        )
        low = np.minimum(np.maximum(m0, lo * replicas), top)
        # candidates x placements
        batch = np.geomspace(low, np.maximum(top, low), BATCH_CANDIDATES)
        local = batch / replicas
        if accumulation:
            accum = np.ceil(local / hi - _EPS) - 1
            single_above_m0 = (replicas == 1) & (local > m0 + _EPS)
            accum = np.where(single_above_m0, np.maximum(accum, 1), accum)
        else:
            accum = np.zeros_like(local)
        atomic = np.ceil(local / (accum + 1) - _EPS)
        good = self.goodput(nodes, replicas, atomic, accum)
        valid = (atomic >= lo) & (atomic <= hi)
        good = np.where(valid, good, 0.0)
        best = np.argmax(good, axis=0)
        cols = np.arange(good.shape[1])
        best_good = good[best, cols]
        best_atomic = np.where(best_good > 0, atomic[best, cols], 0).astype(np.int64)
        best_accum = np.where(best_good > 0, accum[best, cols], 0).astype(np.int64)
        return BatchChoice(
            goodput=best_good.reshape(shape),
            local_bsz=best_atomic.reshape(shape),
            accum_steps=best_accum.reshape(shape),
        )


def speedup(
    model: GoodputModel,
    num_nodes: ArrayLike,
    num_replicas: ArrayLike,
    max_batch_size: int | None = None,
    local_bsz_bounds: tuple[int, int] | None = None,
    accumulation: bool = False,
    base: tuple[int, int] = (1, 1),
) -> Array:
    """SPEEDUP (Pollux Eq. 15): the best goodput on each placement over the best goodput on the
    ``base`` placement (nodes, replicas), each at its best batch size; 0 where no batch is valid.
    The paper's base is a fair 1/J share of the cluster; its simulator's (the default) one GPU."""
    args = (max_batch_size, local_bsz_bounds, accumulation)
    reference = model.optimize(base[0], base[1], *args).goodput
    best = model.optimize(num_nodes, num_replicas, *args).goodput
    result: Array = np.where(reference > 0, best / np.where(reference > 0, reference, 1.0), 0.0)
    return result


def total_batch_size(
    num_replicas: ArrayLike, local_bsz: ArrayLike, accum_steps: ArrayLike = 0
) -> Array:
    """M(a, m, s) = K * m * (s + 1): the samples in one synchronised iteration."""
    result: Array = (
        np.asarray(num_replicas, dtype=float)
        * np.asarray(local_bsz, dtype=float)
        * (np.asarray(accum_steps, dtype=float) + 1.0)
    )
    return result
