"""Fitting the iteration-time model (Pollux Eq. 11) to measured times with scipy.optimize.

The fit minimises the root-mean-square *log* error of the predicted compute time and step time
(so a 10 % miss costs the same on a 20 ms step as on a 2 s one), over the logarithms of the
parameters (bounded; gamma in [1, 10]). Parameters the points cannot identify are pinned, as
Pollux's agent does for a job that has only seen a few placements:

- one local batch size only: alpha_c = beta_c * m (half the compute time each);
- no multi-node point: the inter-node parameters are set to 1.1 x the intra-node ones (a prior:
  crossing nodes is slower);
- no single-node multi-replica point: the intra-node parameters are pinned at their floor;
- no point with more than two replicas: the retrogression terms beta_n, beta_r at their floor.

The result reports its relative error on the points it was fitted on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from goodput.model import Array, PerfParams, overlapped_time, sync_time
from goodput.model import compute_time as _compute_time

_FLOOR = 1e-8  # smallest time parameter (seconds)
_CEIL = 1e3  # largest time parameter (seconds)
_GAMMA_MAX = 10.0  # Eq. 10 is close to max() at 10
_GAMMA_REG = 1e-3  # pulls gamma towards 1 (the alphas and betas fit more easily)
_RETRO_REG = 1e-2  # prefers small retrogression (beta/alpha): the optimistic model
_FTOL = 1e-7  # relative change of the objective at which the fit stops (errors of ~1e-2 matter)
_START = (1e-1, 1e-2, 1e-1, 1e-2, 1e-1, 1e-2, 1.0 + 1e-3)


@dataclass(frozen=True)
class FitResult:
    """A fitted model and its error on its own points (relative: |pred - meas| / meas)."""

    params: PerfParams
    median_rel_error: float  # of the step time
    max_rel_error: float  # of the step time
    compute_median_rel_error: float  # of the compute (step minus sync) time
    num_points: int
    converged: bool


def _checked(name: str, values: ArrayLike, size: int | None = None) -> Array:
    arr = np.asarray(values, dtype=float).reshape(-1)
    if arr.size == 0:
        raise ValueError(f"{name}: no points to fit")
    if size is not None and arr.size != size:
        raise ValueError(f"{name}: {arr.size} values, expected {size}")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name}: every value must be finite and positive")
    return arr


def _params(times: Array, gamma: float) -> PerfParams:
    a_c, b_c, a_n, b_n, a_r, b_r = (float(v) for v in times)
    return PerfParams(a_c, b_c, a_n, b_n, a_r, b_r, gamma)


def _predict(theta: Array, nodes: Array, replicas: Array, bsz: Array) -> tuple[Array, Array]:
    p = _params(np.exp(theta[:6]), float(theta[6]))
    t_compute = _compute_time(p, bsz)
    t_step = overlapped_time(t_compute, sync_time(p, nodes, replicas), p.gamma)
    return t_compute, t_step


def _objective(
    theta: Array, nodes: Array, replicas: Array, bsz: Array, log_comp: Array, log_step: Array
) -> tuple[float, Array]:
    """RMS log-error of compute and step time plus the two regularisers, and its gradient in
    theta = (log alpha_c, log beta_c, log alpha_n, log beta_n, log alpha_r, log beta_r, gamma)."""
    a_c, b_c, a_n, b_n, a_r, b_r = np.exp(theta[:6])
    gamma = float(theta[6])
    retro = np.maximum(replicas - 2.0, 0.0)
    inter = (replicas > 1) & (nodes > 1)
    intra = (replicas > 1) & (nodes <= 1)
    comp = a_c + b_c * bsz
    sync = np.where(inter, a_n + b_n * retro, np.where(intra, a_r + b_r * retro, 0.0))
    has_sync = sync > 0
    safe_sync = np.where(has_sync, sync, 1.0)
    comp_g = comp**gamma
    sync_g = np.where(has_sync, safe_sync**gamma, 0.0)
    total = comp_g + sync_g
    log_pred_c = np.log(comp)
    log_pred_s = np.log(total) / gamma
    res_c = log_pred_c - log_comp
    res_s = log_pred_s - log_step
    err_c = float(np.sqrt(np.mean(res_c**2)))
    err_s = float(np.sqrt(np.mean(res_s**2)))
    # derivatives of compute and sync time with respect to the log-parameters
    d_comp = [a_c * np.ones_like(bsz), b_c * bsz]
    zero = np.zeros_like(bsz)
    d_sync = [a_n * inter, b_n * retro * inter, a_r * intra, b_r * retro * intra]
    dls_dc = comp_g / comp / total
    dls_ds = np.where(has_sync, sync_g / safe_sync / total, 0.0)
    log_terms = comp_g * np.log(comp) + np.where(has_sync, sync_g * np.log(safe_sync), 0.0)
    dls_dg = -np.log(total) / gamma**2 + log_terms / total / gamma
    d_log_c = [d / comp for d in d_comp] + [zero] * 5
    d_log_s = [dls_dc * d for d in d_comp] + [dls_ds * d for d in d_sync] + [dls_dg]
    grad = np.zeros(7)
    for i in range(7):
        if err_c > 0:
            grad[i] += float(np.mean(res_c * d_log_c[i])) / err_c
        if err_s > 0:
            grad[i] += float(np.mean(res_s * d_log_s[i])) / err_s
    ratio_n = np.exp(2 * (theta[3] - theta[2]))
    ratio_r = np.exp(2 * (theta[5] - theta[4]))
    value = err_c + err_s + _GAMMA_REG * (gamma - 1.0) ** 2 + _RETRO_REG * (ratio_n + ratio_r)
    grad[6] += 2 * _GAMMA_REG * (gamma - 1.0)
    grad[3] += 2 * _RETRO_REG * ratio_n
    grad[2] -= 2 * _RETRO_REG * ratio_n
    grad[5] += 2 * _RETRO_REG * ratio_r
    grad[4] -= 2 * _RETRO_REG * ratio_r
    return float(value), grad


def fit_perf_params(
    num_nodes: ArrayLike,
    num_replicas: ArrayLike,
    local_bsz: ArrayLike,
    step_time: ArrayLike,
    compute_time: ArrayLike,
) -> FitResult:
    """Fits ``PerfParams`` to measured iterations without gradient accumulation: per point its
    node count, replica count, local batch size, step time (compute + synchronisation, as
    measured) and compute time (the step time less the measured synchronisation time)."""
    nodes = _checked("num_nodes", num_nodes)
    n = nodes.size
    replicas = _checked("num_replicas", num_replicas, n)
    bsz = _checked("local_bsz", local_bsz, n)
    t_step = _checked("step_time", step_time, n)
    t_comp = _checked("compute_time", compute_time, n)
    if np.any(replicas < nodes):
        raise ValueError("num_replicas: each point needs num_replicas >= num_nodes")

    log_floor, log_ceil = np.log(_FLOOR), np.log(_CEIL)
    lower = [log_floor] * 6 + [1.0]
    upper = [log_ceil] * 6 + [_GAMMA_MAX]
    start = [float(np.log(v)) for v in _START[:6]] + [_START[6]]
    multi_node = bool(np.any(nodes > 1))
    intra = bool(np.any((nodes == 1) & (replicas > 1)))

    def pin(index: int, value: float) -> None:
        lower[index] = upper[index] = start[index] = value

    if np.unique(bsz).size == 1:
        half = float(np.log(np.mean(t_comp) / 2.0))
        pin(0, half)
        pin(1, half - float(np.log(bsz[0])))
    if not multi_node:
        pin(2, log_floor)
        pin(3, log_floor)
    if not intra:
        pin(4, log_floor)
        pin(5, log_floor)
    if not np.any(replicas > 2):
        pin(3, log_floor)
        pin(5, log_floor)

    # imported here: a run whose jobs are none of Pollux's never fits, and scipy.optimize is a
    # quarter of a second of start-up
    from scipy.optimize import minimize

    result = minimize(
        _objective,
        np.array(start),
        args=(nodes, replicas, bsz, np.log(t_comp), np.log(t_step)),
        jac=True,
        method="L-BFGS-B",
        bounds=list(zip(lower, upper, strict=True)),
        options={"ftol": _FTOL},
    )
    theta = np.asarray(result.x, dtype=float)
    values = np.exp(theta[:6])
    if not multi_node:
        values[2] = max(values[2], 1.1 * values[4])
        values[3] = max(values[3], 1.1 * values[5])
    params = _params(values, float(theta[6]))
    pred_c, pred_s = _predict(
        np.concatenate([np.log(values), [params.gamma]]), nodes, replicas, bsz
    )
    rel_step = np.abs(pred_s - t_step) / t_step
    rel_comp = np.abs(pred_c - t_comp) / t_comp
    return FitResult(
        params=params,
        median_rel_error=float(np.median(rel_step)),
        max_rel_error=float(np.max(rel_step)),
        compute_median_rel_error=float(np.median(rel_comp)),
        num_points=n,
        converged=bool(result.success),
    )
