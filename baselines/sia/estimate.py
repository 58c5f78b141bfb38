"""Sia's goodput estimator (SOSP 2023, section 3.2): one job's goodput per GPU type,
bootstrapped from a few one-GPU profiles.

Value objects and pure functions (the policy imports this module when it decides: it loads the
traces, pandas and scipy).

- **Profiles.** When a job arrives, Sia runs it for a few iterations on one GPU of every type at
  a few local batch sizes (:data:`PROFILE_BATCHES`: the smallest, the middle and the largest the
  application allows): the compute-time parameters of that type, for the cost of a few seconds.
- **Observations.** Every round a job runs, its workers report the iteration and
  synchronisation time of the configuration it ran on (type, nodes, GPUs, local batch) and its
  gradient statistics; the throughput model of that type (Pollux's Eq. 11) is refitted to them.
- **Bootstrapping.** A type on which the job has run on several GPUs has its own fitted model.
  A type it has only profiled borrows the scaling of the type it has run on most (by most
  multi-GPU observations, then the cluster's type order): goodput there is the other type's on
  the same nodes and GPUs, times the ratio of the two types' one-GPU goodputs (Sia's projection
  across types). Before any multi-GPU observation, a job is assumed to scale perfectly (Pollux's
  prior, which Sia's AdaptDL-based agents keep), and may get at most twice the most GPUs it has
  held.

In simulation the profiles and observations are the noise-free ground truth the simulator plays
(:func:`hadar.workloads.pollux_throughput.iteration_on`), as Sia's own simulator feeds them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np

from goodput import GoodputModel, GradParams, PerfParams, fit_perf_params
from goodput.traces import bundled_trace
from hadar.core.jobs import Job
from hadar.workloads.pollux_throughput import iteration_on

PROFILE_BATCHES = 3
"""One-GPU profiles per GPU type (local batches spread geometrically over the allowed range)."""


@dataclass(frozen=True)
class Point:
    """One measured configuration on one GPU type: mean iteration and sync time (seconds)."""

    nodes: int
    gpus: int
    local_bsz: int
    step_time: float
    sync_time: float


@dataclass(frozen=True)
class JobEstimate:
    """What Sia knows about one job (JSON-friendly through :meth:`to_json`)."""

    application: str
    init_batch_size: int
    max_batch_size: int
    local_bsz_bounds: tuple[int, int]
    adaptive: bool
    points: Mapping[str, tuple[Point, ...]]
    """Per GPU type, its profile and observed configurations."""
    grad: GradParams | None = None
    max_gpus_seen: int = 0

    @property
    def batch_limit(self) -> int:
        return self.max_batch_size if self.adaptive else self.init_batch_size

    def to_json(self) -> dict[str, Any]:
        return {
            "application": self.application,
            "init_batch_size": self.init_batch_size,
            "max_batch_size": self.max_batch_size,
            "local_bsz_bounds": list(self.local_bsz_bounds),
            "adaptive": self.adaptive,
            "points": {t: [asdict(p) for p in pts] for t, pts in sorted(self.points.items())},
            "grad": None if self.grad is None else [self.grad.sqr, self.grad.var],
            "max_gpus_seen": self.max_gpus_seen,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobEstimate:
        lo, hi = data["local_bsz_bounds"]
        return cls(
            application=str(data["application"]),
            init_batch_size=int(data["init_batch_size"]),
            max_batch_size=int(data["max_batch_size"]),
            local_bsz_bounds=(int(lo), int(hi)),
            adaptive=bool(data["adaptive"]),
            points={t: tuple(Point(**p) for p in pts) for t, pts in data["points"].items()},
            grad=None if data["grad"] is None else GradParams(*data["grad"]),
            max_gpus_seen=int(data["max_gpus_seen"]),
        )


def profile_batches(lo: int, hi: int) -> list[int]:
    """The local batches a one-GPU profile runs at."""
    if hi <= lo:
        return [lo]
    grid = np.geomspace(lo, hi, PROFILE_BATCHES)
    return sorted({int(round(b)) for b in grid})


def new_estimate(job: Job, gpu_types: tuple[str, ...]) -> JobEstimate:
    """A fresh estimate of a job of Pollux's applications: its one-GPU profile on each type."""
    trace = bundled_trace(job.job_type)
    hi = (
        trace.max_batch_size
        if job.batch_range is None
        else min(job.batch_range[1], trace.max_batch_size)
    )
    bounds = (trace.min_local_bsz, trace.max_local_bsz)
    points = {t: profile(job.job_type, t, bounds) for t in gpu_types}
    return JobEstimate(
        application=job.job_type,
        init_batch_size=trace.init_batch_size,
        max_batch_size=max(hi, trace.init_batch_size),
        local_bsz_bounds=bounds,
        adaptive=job.batch_range is not None and job.batch_range[0] < job.batch_range[1],
        points=points,
    )


def profile(application: str, gpu_type: str, bounds: tuple[int, int]) -> tuple[Point, ...]:
    """One-GPU iterations of ``application`` on ``gpu_type`` at :func:`profile_batches`."""
    out = []
    for m in profile_batches(*bounds):
        step, _ = iteration_on(application, (1,), gpu_type, m)
        out.append(Point(1, 1, m, step, 0.0))
    return tuple(out)


def with_types(est: JobEstimate, gpu_types: tuple[str, ...]) -> JobEstimate:
    """``est`` with a profile of every type it has not profiled yet (a node of a new type)."""
    missing = [t for t in gpu_types if t not in est.points]
    if not missing:
        return est
    points = dict(est.points)
    for t in missing:
        points[t] = profile(est.application, t, est.local_bsz_bounds)
    return replace(est, points=points)


def observe(est: JobEstimate, gpu_type: str, point: Point, grad: GradParams) -> JobEstimate:
    """Record one round's measurement on ``gpu_type`` (the same configuration again replaces
    the older figure: the simulator's measurements are noise-free) and the gradient
    statistics."""
    key = (min(point.nodes, 2), point.gpus, point.local_bsz)
    kept = tuple(
        p for p in est.points.get(gpu_type, ()) if (min(p.nodes, 2), p.gpus, p.local_bsz) != key
    )
    points = dict(est.points)
    points[gpu_type] = (*kept, point)
    return replace(est, points=points, grad=grad, max_gpus_seen=max(est.max_gpus_seen, point.gpus))


def simulated_point(
    est: JobEstimate, gpu_type: str, per_node: tuple[int, ...], batch: int, progress: float
) -> tuple[Point, GradParams]:
    """What a job's workers measure on ``per_node`` GPUs of ``gpu_type`` at total batch
    ``batch``, ``progress`` iterations at M0 into training."""
    trace = bundled_trace(est.application)
    gpus = sum(per_node)
    local, accum = trace.split_batch(gpus, batch)
    step, sync = iteration_on(est.application, per_node, gpu_type, local)
    grad = trace.grad_stats(gpus * local * (accum + 1), progress)
    return Point(len(per_node), gpus, local, step, sync), grad


SYNC_FLOOR_S = 1e-8
"""The synchronisation parameters of a type the job has only profiled on one GPU: none
measured, so (almost) none assumed (the perfect-scaling prior)."""


@lru_cache(maxsize=16384)
def _fit(points: tuple[Point, ...]) -> PerfParams:
    """Eq. 11 fitted to ``points`` (a pure function of them: cached). One-GPU points only fix
    the compute time, a line in the local batch fitted by least squares (no solver needed)."""
    if all(p.gpus == 1 for p in points):
        bsz = np.array([p.local_bsz for p in points], dtype=float)
        step = np.array([p.step_time for p in points], dtype=float)
        if np.unique(bsz).size > 1:
            beta, alpha = np.polyfit(bsz, step, 1)
        else:
            alpha, beta = step.mean() / 2.0, step.mean() / 2.0 / bsz[0]
        alpha, beta = max(float(alpha), SYNC_FLOOR_S), max(float(beta), SYNC_FLOOR_S)
        floor = SYNC_FLOOR_S
        return PerfParams(alpha, beta, floor, floor, floor, floor, 1.0)
    cols = [np.array(c, dtype=float) for c in zip(*(astuple(p) for p in points), strict=True)]
    nodes, gpus, bsz, step, sync = cols
    return fit_perf_params(nodes, gpus, bsz, step, np.maximum(step - sync, 1e-6)).params


def astuple(p: Point) -> tuple[int, int, int, float, float]:
    return (p.nodes, p.gpus, p.local_bsz, p.step_time, p.sync_time)


def _model(est: JobEstimate, gpu_type: str) -> GoodputModel:
    grad = est.grad if est.grad is not None and est.adaptive else GradParams(0.0, 1.0)
    return GoodputModel(_fit(est.points[gpu_type]), grad, est.init_batch_size)


def _multi(est: JobEstimate, gpu_type: str) -> int:
    return sum(1 for p in est.points.get(gpu_type, ()) if p.gpus > 1)


def scaling_source(est: JobEstimate, gpu_types: tuple[str, ...]) -> str | None:
    """The type whose fitted scaling the job's other types borrow: the one with most multi-GPU
    observations (then the cluster's type order); None before any."""
    best = max(gpu_types, key=lambda t: _multi(est, t), default=None)
    return best if best is not None and _multi(est, best) > 0 else None


def _optimize(
    model: GoodputModel, est: JobEstimate, nodes: np.ndarray, gpus: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    choice = model.optimize(
        nodes,
        gpus,
        max_batch_size=est.batch_limit,
        local_bsz_bounds=est.local_bsz_bounds,
        accumulation=True,
    )
    return choice.goodput, choice.local_bsz, choice.accum_steps


def goodputs(
    est: JobEstimate, gpu_type: str, gpu_types: tuple[str, ...], nodes: np.ndarray, gpus: np.ndarray
) -> np.ndarray:
    """The job's estimated best goodput (samples at M0 per second) on ``nodes``/``gpus`` of
    ``gpu_type``, bootstrapped as the module says."""
    source = scaling_source(est, gpu_types)
    if source is None or _multi(est, gpu_type) > 0 or source == gpu_type:
        return _optimize(_model(est, gpu_type), est, nodes, gpus)[0]
    one = np.ones(1)
    own = _optimize(_model(est, gpu_type), est, one, one)[0][0]
    src_model = _model(est, source)
    theirs = _optimize(src_model, est, one, one)[0][0]
    borrowed = _optimize(src_model, est, nodes, gpus)[0]
    ratio = own / theirs if theirs > 0 else 0.0
    out: np.ndarray = borrowed * ratio
    return out


def best_batch(
    est: JobEstimate, gpu_type: str, gpu_types: tuple[str, ...], nodes: int, gpus: int
) -> int:
    """The total batch size Sia runs the job at on ``gpus`` GPUs of ``gpu_type`` over ``nodes``
    nodes: the one maximising its estimated goodput there (the scaling model used for
    :func:`goodputs`); at least M0, at most the job's limit."""
    source = scaling_source(est, gpu_types)
    which = gpu_type if source is None or _multi(est, gpu_type) > 0 else source
    _, local, accum = _optimize(_model(est, which), est, np.array([nodes]), np.array([gpus]))
    batch = gpus * int(local[0]) * (int(accum[0]) + 1)
    if batch <= 0:
        return est.init_batch_size
    return int(min(max(batch, est.init_batch_size), est.batch_limit))


def exploration_limit(est: JobEstimate) -> int:
    """At most twice the most GPUs the job has held (at least 1)."""
    return max(2 * est.max_gpus_seen, 1)


def max_useful_gpus(est: JobEstimate) -> int:
    """More GPUs than the largest batch over the smallest local batch cannot be used."""
    return max(est.max_batch_size // est.local_bsz_bounds[0], 1)


def progress_of(job: Job, done_samples: float) -> float:
    """Iterations at M0 done (the traces' progress unit)."""
    return done_samples / bundled_trace(job.job_type).init_batch_size


__all__ = [
    "JobEstimate",
    "Point",
    "best_batch",
    "exploration_limit",
    "goodputs",
    "max_useful_gpus",
    "new_estimate",
    "observe",
    "profile",
    "profile_batches",
    "progress_of",
    "scaling_source",
    "simulated_point",
    "with_types",
]
