"""Themis (Mahajan et al., NSDI 2020) as Gavel implements it: finish-time fairness
(``finish_time_fairness_perf``), on Gavel's round-based mechanism (``baselines/gavel.py``).

A job's finish-time fairness is ``rho_j = T_shared / T_isolated``: the time it will have taken
under the allocation (time since arrival + remaining steps / its allocated throughput) over the
time it would take on its own 1/n share of the cluster (time that share would have needed for
the steps done so far, accumulated at every allocation, + remaining steps / the share's
throughput). The allocation minimises the largest rho:

    minimise  max_j (t_j + R_j / sum_k T[j,k] x[j,k]) / (I_j + R_j / T_iso[j])

over Gavel's time fractions ``x`` (each job's row sums to at most 1, each type's W-weighted column
to at most its GPU count). Gavel solves it with cvxpy (``inv_pos``); here the level LP of
``baselines.gavel_lp`` answers "can every rho be at most r?" (``sum_k T x >= R_j / (r D_j -
t_j)``, i.e. level >= 1 with ``coef_j = (r D_j - t_j) / R_j``) and r is bisected, each feasible
solution's own max rho tightening the upper end, to 1 % (``tolerance``).

The isolated share (Gavel's ``IsolatedPolicy``): each job gets ``count_k / n`` GPUs of every type,
i.e. the time fraction ``count_k / (n W_j)`` on type k, scaled down when those fractions add up to
more than 1. ``I_j``, the isolated time for the steps done so far, is kept per job in the policy's
state (``Policy.state``), as Gavel keeps ``_cumulative_isolated_time``.

This is Gavel's reference implementation of Themis's fairness metric, not Themis's auction
(partial allocation auctions with a lease); the AFS paper compares with Themis's full system.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from baselines.gavel import GavelConfig, GavelPolicy
from baselines.gavel_lp import LpResult, runnable_mask, solve_level_lp
from hadar.core.jobs import JobStatus
from hadar.policy import PolicyInfo, RoundContext, RoundPlan, register_policy


@dataclass(frozen=True)
class ThemisConfig(GavelConfig):
    tolerance: float = 0.01
    """Relative precision of the bisection on the largest finish-time fairness."""
    max_iterations: int = 30

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 < self.tolerance < 1:
            raise ValueError("tolerance must be in (0, 1)")
        if self.max_iterations < 1:
            raise ValueError("max_iterations must be >= 1")


def isolated_throughput(T: np.ndarray, W: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Each job's throughput on its own 1/n share of every GPU type (Gavel's isolated policy)."""
    T = np.asarray(T, dtype=float)
    n = T.shape[0]
    if n == 0:
        return np.zeros(0)
    ok = runnable_mask(T, np.asarray(W, dtype=float), np.asarray(counts, dtype=float))
    x = np.where(ok, np.asarray(counts, dtype=float)[None, :] / (n * np.asarray(W)[:, None]), 0.0)
    total = x.sum(axis=1, keepdims=True)
    x = np.where(total > 1, x / np.where(total > 0, total, 1.0), x)
    result: np.ndarray = (T * x).sum(axis=1)
    return result


def finish_time_fairness(
    T: np.ndarray,
    W: np.ndarray,
    counts: np.ndarray,
    remaining: np.ndarray,
    elapsed: np.ndarray,
    isolated_done: np.ndarray,
    tolerance: float = 0.01,
    max_iterations: int = 30,
) -> LpResult:
    """The allocation minimising the largest finish-time fairness (module docstring); ``level``
    is that largest rho. Jobs that cannot run anywhere are left out (x = 0)."""
    T = np.asarray(T, dtype=float)
    W = np.asarray(W, dtype=float)
    counts = np.asarray(counts, dtype=float)
    R = np.asarray(remaining, dtype=float)
    t = np.asarray(elapsed, dtype=float)
    t_iso = isolated_throughput(T, W, counts)
    active = (t_iso > 0) & (R > 0) & runnable_mask(T, W, counts).any(axis=1)
    if not active.any():
        return LpResult(np.zeros_like(T), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        D = np.where(active, np.asarray(isolated_done, dtype=float) + R / t_iso, 1.0)

    def rho(x: np.ndarray) -> float:
        thr = (T * x).sum(axis=1)
        with np.errstate(divide="ignore"):
            r = np.where(active, (t + R / np.where(thr > 0, thr, 0.0)) / D, 0.0)
        return float(r.max())

    def attempt(level: float) -> np.ndarray | None:
        coef = np.where(active, (level * D - t) / np.where(R > 0, R, 1.0), 0.0)
        res = solve_level_lp(T, coef, W, counts)
        return res.x if res.level >= 1.0 - 1e-9 else None

    lo = float((t[active] / D[active]).max())  # even infinite throughput cannot do better
    x_iso = solve_level_lp(T, np.where(active, 1.0 / t_iso, 0.0), W, counts).x
    best, hi = x_iso, rho(x_iso)
    probe = max(lo, 1.0)
    for _ in range(64):  # the max-min allocation starves a job: find a feasible level
        if np.isfinite(hi):
            break
        probe *= 4.0
        x = attempt(probe)
        if x is not None:
            best, hi = x, min(probe, rho(x))
    for _ in range(max_iterations):
        if hi - lo <= tolerance * hi:
            break
        mid = 0.5 * (lo + hi)
        x = attempt(mid)
        if x is None:
            lo = mid
        else:
            best, hi = x, min(mid, rho(x))
    return LpResult(best, hi)


@register_policy
class ThemisPolicy(GavelPolicy):
    """Gavel's finish-time fairness (Themis's metric) on Gavel's round mechanism."""

    name = "themis"
    info = PolicyInfo(title="Themis", colour="#fdae6b", gavel_native=True)
    config_class = ThemisConfig
    config: ThemisConfig

    def __init__(self, config: ThemisConfig | None = None, **knobs: Any) -> None:
        super().__init__(config or ThemisConfig(**knobs))
        self._isolated: dict[int, float] = {}
        """Per job: isolated time for the steps done up to the last allocation."""
        self._last: dict[int, tuple[float, float]] = {}
        """Per job: (remaining steps, isolated throughput) at the last allocation."""
        self._now = 0.0

    def state(self) -> dict[str, Any]:
        out = super().state()
        out["isolated"] = {str(j): v for j, v in self._isolated.items()}
        out["last"] = {str(j): list(v) for j, v in self._last.items()}
        return out

    def restore(self, state: Mapping[str, Any]) -> None:
        if not state:
            return
        rest = dict(state)
        self._isolated = {int(j): float(v) for j, v in rest.pop("isolated").items()}
        self._last = {int(j): (float(v[0]), float(v[1])) for j, v in rest.pop("last").items()}
        super().restore(rest)

    def decide(self, ctx: RoundContext) -> RoundPlan:
        self._now = ctx.now
        return super().decide(ctx)

    def allocate(
        self, statuses: Sequence[JobStatus], T: np.ndarray, counts: np.ndarray, types: Sequence[str]
    ) -> np.ndarray:
        W = np.array([s.job.num_gpus for s in statuses], dtype=float)
        R = np.array([s.remaining_steps for s in statuses], dtype=float)
        t_iso = isolated_throughput(T, W, counts)
        ids = [s.job_id for s in statuses]
        for j, r in zip(ids, R, strict=True):
            prev = self._last.get(j)
            if prev is not None and prev[1] > 0:
                self._isolated[j] = self._isolated.get(j, 0.0) + (prev[0] - r) / prev[1]
        self._isolated = {j: self._isolated.get(j, 0.0) for j in ids}
        self._last = {j: (float(r), float(ti)) for j, r, ti in zip(ids, R, t_iso, strict=True)}
        elapsed = np.array([max(0.0, self._now - s.job.arrival) for s in statuses])
        done = np.array([self._isolated[j] for j in ids])
        cfg = self.config
        return finish_time_fairness(
            T, W, counts, R, elapsed, done, cfg.tolerance, cfg.max_iterations
        ).x
