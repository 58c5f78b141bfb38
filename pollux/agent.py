"""PolluxAgent (Pollux §4.1): one job's online goodput model and its batch-size / LR choice.

Value objects and pure functions. The agent records the iteration times its job reports, per
configuration (nodes, GPUs, local batch), refits the throughput model (Eq. 11,
``goodput.fit_perf_params``) when a new configuration appears, keeps the latest gradient
statistics (from the simulator's traces, or estimated on real nodes from per-replica gradient
norms, ``noise_from_replicas``), and with them:

- gives PolluxSched the job's best goodput per (nodes, GPUs) (``best_goodput``), with the paper's
  prior-driven exploration: before any measurement a job is assumed to scale perfectly, the fit
  pins what it has not seen (``goodput.fit``), and the job may get at most twice the most GPUs
  it has held (``exploration_limit``);
- picks the batch size for an allocation (Eq. 13: local batch and accumulation steps
  maximising goodput, ``choose_batch``) and the learning-rate factor of its scaling rule
  (``lr_factor``: AdaScale's gain for SGD, square root for Adam/AdamW, as in the paper's Table 1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np

from goodput import BatchChoice, GoodputModel, GradParams, PerfParams, fit_perf_params
from goodput.scaling import (  # the agent's LR rule and noise estimators (pure maths)
    LrRule,
    lr_factor,
    noise_from_consecutive,
    noise_from_differences,
    noise_from_replicas,
)
from pollux.speedup import BestGoodput

__all__ = [
    "AgentState",
    "LrRule",
    "ProfilePoint",
    "best_goodput",
    "choose_batch",
    "exploration_limit",
    "lr_factor",
    "model",
    "noise_from_consecutive",
    "noise_from_differences",
    "noise_from_replicas",
    "observe",
    "refit",
]


@dataclass(frozen=True)
class ProfilePoint:
    """One measured configuration: mean step and synchronisation time per iteration (seconds)."""

    num_nodes: int
    num_gpus: int
    local_bsz: int
    step_time: float
    sync_time: float
    samples: int = 1

    @property
    def key(self) -> tuple[int, int, int]:
        return (min(self.num_nodes, 2), self.num_gpus, self.local_bsz)

    def to_json(self) -> dict[str, Any]:
        """Its fields by name (``dataclasses.asdict`` without its recursive copy: a real run
        journals every agent's points each round)."""
        return {
            "num_nodes": self.num_nodes,
            "num_gpus": self.num_gpus,
            "local_bsz": self.local_bsz,
            "step_time": self.step_time,
            "sync_time": self.sync_time,
            "samples": self.samples,
        }


@dataclass(frozen=True)
class AgentState:
    """What one job's PolluxAgent knows (JSON-friendly through :func:`to_json`)."""

    init_batch_size: int
    max_batch_size: int
    local_bsz_bounds: tuple[int, int]
    adaptive: bool = True
    """False: the batch size stays M0 (efficiency 1; only the GPU count adapts, §4.2)."""
    points: tuple[ProfilePoint, ...] = ()
    grad: GradParams | None = None
    perf: PerfParams | None = None
    max_gpus_seen: int = 0

    @property
    def batch_limit(self) -> int:
        return self.max_batch_size if self.adaptive else self.init_batch_size

    def to_json(self) -> dict[str, Any]:
        return {
            "init_batch_size": self.init_batch_size,
            "max_batch_size": self.max_batch_size,
            "local_bsz_bounds": list(self.local_bsz_bounds),
            "adaptive": self.adaptive,
            "points": [p.to_json() for p in self.points],
            "grad": None if self.grad is None else [self.grad.sqr, self.grad.var],
            "perf": None if self.perf is None else self.perf.as_array().tolist(),
            "max_gpus_seen": self.max_gpus_seen,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AgentState:
        lo, hi = data["local_bsz_bounds"]
        return cls(
            init_batch_size=int(data["init_batch_size"]),
            max_batch_size=int(data["max_batch_size"]),
            local_bsz_bounds=(int(lo), int(hi)),
            adaptive=bool(data["adaptive"]),
            points=tuple(ProfilePoint(**p) for p in data["points"]),
            grad=None if data["grad"] is None else GradParams(*data["grad"]),
            perf=None if data["perf"] is None else PerfParams(*data["perf"]),
            max_gpus_seen=int(data["max_gpus_seen"]),
        )


def observe(
    state: AgentState, point: ProfilePoint | None = None, grad: GradParams | None = None
) -> AgentState:
    """Record a measurement (averaged with earlier ones of the same configuration) and the
    latest gradient statistics; refits the throughput model when a configuration is new."""
    if grad is not None:
        state = replace(state, grad=grad)
    if point is None:
        return state
    seen = max(state.max_gpus_seen, point.num_gpus)
    points = list(state.points)
    for i, old in enumerate(points):
        if old.key == point.key:
            n = old.samples + point.samples
            points[i] = replace(
                old,
                step_time=(old.step_time * old.samples + point.step_time * point.samples) / n,
                sync_time=(old.sync_time * old.samples + point.sync_time * point.samples) / n,
                samples=n,
            )
            return replace(state, points=tuple(points), max_gpus_seen=seen)
    points.append(point)
    return refit(replace(state, points=tuple(points), max_gpus_seen=seen))


def refit(state: AgentState) -> AgentState:
    """Fit Eq. 11 to every recorded configuration (RMSLE, L-BFGS-B, priors for unseen ones)."""
    if not state.points:
        return replace(state, perf=None)
    key = tuple(
        (p.num_nodes, p.num_gpus, p.local_bsz, p.step_time, p.sync_time) for p in state.points
    )
    return replace(state, perf=_fit(key))


@lru_cache(maxsize=8192)
def _fit(points: tuple[tuple[int, int, int, float, float], ...]) -> PerfParams:
    """The fit is a pure function of the points: jobs of one application that visit the same
    configurations (in simulation, noise-free) share it."""
    nodes, gpus, bsz, step, sync = (np.array(col, dtype=float) for col in zip(*points, strict=True))
    return fit_perf_params(nodes, gpus, bsz, step, np.maximum(step - sync, 1e-6)).params


def exploration_limit(state: AgentState) -> int:
    """At most twice the most GPUs the job has held (at least 1), §4.1."""
    return max(2 * state.max_gpus_seen, 1)


def model(state: AgentState, compute_scale: float = 1.0) -> GoodputModel | None:
    """The job's goodput model, or None before its first measurement. ``compute_scale``
    multiplies the compute time (another GPU type; the synchronisation is the network's)."""
    if state.perf is None:
        return None
    grad = state.grad if state.grad is not None and state.adaptive else GradParams(0.0, 1.0)
    perf = state.perf
    if compute_scale != 1.0:
        perf = replace(
            perf, alpha_c=perf.alpha_c * compute_scale, beta_c=perf.beta_c * compute_scale
        )
    return GoodputModel(perf, grad, state.init_batch_size)


def best_goodput(state: AgentState, compute_scale: float = 1.0) -> BestGoodput:
    """(nodes, GPUs) -> best goodput over batch sizes, for ``speedup.speedup_row``. Before the
    first measurement, perfect scaling (Pollux's prior): K GPUs give K x one GPU's speed."""
    m = model(state, compute_scale)
    if m is None:
        return lambda num_nodes, num_gpus: np.asarray(num_gpus, dtype=float) / compute_scale

    def fn(num_nodes: np.ndarray, num_gpus: np.ndarray) -> np.ndarray:
        return m.optimize(
            num_nodes,
            num_gpus,
            max_batch_size=state.batch_limit,
            local_bsz_bounds=state.local_bsz_bounds,
            accumulation=True,
        ).goodput

    return fn


def choose_batch(
    state: AgentState, num_nodes: int, num_gpus: int, compute_scale: float = 1.0
) -> tuple[int, int]:
    """(local batch per pass, accumulation steps) for an allocation (Eq. 13). Before the first
    measurement: the smallest total batch the GPUs can hold, at least M0 (no accumulation)."""
    lo, hi = state.local_bsz_bounds
    m = model(state, compute_scale)
    if m is None or num_gpus <= 0:
        total = max(state.init_batch_size, lo * max(num_gpus, 1))
        local = min(math.ceil(total / max(num_gpus, 1)), hi)
        return local, 0
    choice: BatchChoice = m.optimize(
        num_nodes,
        num_gpus,
        max_batch_size=state.batch_limit,
        local_bsz_bounds=state.local_bsz_bounds,
        accumulation=True,
    )
    local = int(choice.local_bsz)
    if local <= 0:  # no valid batch: the smallest the job can run
        return max(lo, math.ceil(state.init_batch_size / num_gpus)), 0
    return local, int(choice.accum_steps)
