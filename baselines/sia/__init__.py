"""Sia (Jayaram Subramanya et al., SOSP 2023): heterogeneity-aware, goodput-optimised
scheduling of elastic jobs.

Every round (Sia's scheduling interval, 60 s, is its declared round):

1. **Estimate.** Each job of Pollux's applications has a goodput model per GPU type, bootstrapped
   from one-GPU profiles on every type and refitted to what it reports where it runs
   (``baselines.sia.estimate``). Other jobs (no efficiency data) are valued by the run's
   throughput model at their own gang, linear in the GPU count within their range.
2. **Choose.** For every job and every configuration (GPU type, nodes, GPUs: 1, 2, 4, ... on one
   node, then whole nodes) the normalised goodput, discounted by the restart factor
   ``(age - restarts x delay) / (age + delay)`` for any configuration but the current one, is
   raised to ``p`` = -0.5; an ILP (``baselines.sia.ilp``, HiGHS) picks at most one
   configuration per job within each type's GPUs, with ``lambda_n`` = 1.1 for every job left out
   and ``lambda_a`` = 0.01 for every change (the artifact's settings). A job never spans types.
3. **Place.** Jobs keeping their configuration keep their GPUs; the others take whole free
   nodes (multi-node) or the best-fitting node (one node), largest first. Configurations are
   powers of two within a node, so the per-type GPU count of the ILP always packs.
4. **Batch.** Each placed job runs at the total batch maximising its estimated goodput there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from hadar.core.cluster import Cluster
from hadar.core.jobs import JobStatus, Placement
from hadar.policy import Assignment, Policy, PolicyInfo, RoundContext, RoundPlan, register_policy

if TYPE_CHECKING:
    from baselines.sia.estimate import JobEstimate
    from baselines.sia.ilp import Configuration

MAX_GPUS_PER_JOB = 64
"""The most GPUs one job may get (Sia's and Pollux's simulators cap jobs at 64)."""
MAX_LAMBDA = 1e6
"""The largest ``lambda_n``/``lambda_a``: normalised goodputs' powers are at most 1, and the
ILP's costs must still tell them apart next to the penalties."""


@dataclass(frozen=True)
class SiaConfig:
    p: float = -0.5
    """Fairness exponent of normalised goodput (Sia's default; must be negative)."""
    lambda_n: float = 1.1
    """Objective penalty per job left without GPUs (the artifact's ``lambda_n``)."""
    lambda_a: float = 0.01
    """Objective penalty per configuration changed from last round's (``lambda_a``)."""
    explore: bool = True
    """A job may get at most twice the most GPUs it has held (its scaling is unknown beyond)."""

    def __post_init__(self) -> None:
        if not self.p < 0:
            raise ValueError("p must be negative")
        if not 1 < self.lambda_n <= MAX_LAMBDA:
            raise ValueError(
                f"lambda_n must be above 1 and at most {MAX_LAMBDA:g} (got {self.lambda_n:g}): at "
                "1 or below, leaving a waiting job out costs no more than its smallest "
                "configuration (normalised goodput 1), so it may never get GPUs; beyond, the "
                "goodput terms vanish beside it"
            )
        if not 0 <= self.lambda_a <= MAX_LAMBDA:
            raise ValueError(
                f"lambda_a must be between 0 and {MAX_LAMBDA:g} (got {self.lambda_a:g})"
            )


@register_policy
class SiaPolicy(Policy):
    """Goodput per (GPU type, GPU count) from bootstrapped profiles; one ILP per round."""

    name = "sia"
    config_class = SiaConfig
    info = PolicyInfo(
        title="Sia",
        colour="#b15928",
        defaults=frozenset({"compare-elastic"}),
        rank=55,
        adapts_batch=True,
        round_s=60.0,
    )

    def __init__(self, config: SiaConfig | None = None, **knobs: Any) -> None:
        self.config = config or SiaConfig(**knobs)
        self._estimates: dict[int, JobEstimate] = {}
        self._restarts: dict[int, int] = {}
        self._batch: dict[int, int] = {}

    # -- state -------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {
            "estimates": {str(j): e.to_json() for j, e in sorted(self._estimates.items())},
            "restarts": {str(j): r for j, r in sorted(self._restarts.items())},
            "batch": {str(j): b for j, b in sorted(self._batch.items())},
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        from baselines.sia.estimate import JobEstimate

        self._estimates = {
            int(j): JobEstimate.from_json(e) for j, e in state.get("estimates", {}).items()
        }
        self._restarts = {int(j): int(r) for j, r in state.get("restarts", {}).items()}
        self._batch = {int(j): int(b) for j, b in state.get("batch", {}).items()}

    # -- one round ---------------------------------------------------------------------------
    def decide(self, ctx: RoundContext) -> RoundPlan:
        from baselines.sia import ilp as sia_ilp

        jobs = list(ctx.jobs)
        if not jobs:
            return RoundPlan((), {"jobs": 0})
        cluster = ctx.cluster
        cap = cluster.capacity
        types = cluster.gpu_types
        node_sizes = [int(cap[:, t].max()) for t in range(len(types))]
        node_counts = [int(np.count_nonzero(cap[:, t] == node_sizes[t])) for t in range(len(types))]
        configs = sia_ilp.configurations(node_sizes, node_counts)
        for s in jobs:
            self._observe(s, ctx)
        good = np.array([self._goodputs(s, ctx, configs) for s in jobs]).reshape(
            len(jobs), len(configs)
        )
        current = np.zeros_like(good, dtype=bool)
        for j, s in enumerate(jobs):
            k = _config_of(ctx.current.get((s.job_id, 0)), cluster, configs)
            if k is not None:
                current[j, k] = True
        factor = np.array([self._restart_factor(s, ctx) for s in jobs])
        cost = sia_ilp.objective(
            good, current, factor, self.config.p, self.config.lambda_n, self.config.lambda_a
        )
        chosen = sia_ilp.solve(cost, configs, cap.sum(axis=0))
        placements = _place(jobs, chosen, configs, ctx)
        out: list[Assignment] = []
        for j, s in enumerate(jobs):
            placement = placements.get(j)
            if placement is None:
                continue
            if s.job_id not in self._restarts:
                self._restarts[s.job_id] = 0
            elif ctx.current.get((s.job_id, 0)) != placement:
                self._restarts[s.job_id] += 1
            cfg = configs[int(chosen[j])]
            batch = self._choose_batch(s, cfg, types)
            out.append(Assignment(s.job_id, placement, batch_size=batch))
        info = {
            "jobs": len(jobs),
            "placed": len(out),
            "unplaced_by_packing": int(np.count_nonzero(chosen >= 0)) - len(out),
            "gpus_used": sum(a.num_gpus for a in out),
            "configurations": len(configs),
        }
        return RoundPlan(tuple(out), info)

    # -- estimates ---------------------------------------------------------------------------
    def _estimate(self, s: JobStatus, types: tuple[str, ...]) -> JobEstimate:
        from baselines.sia.estimate import new_estimate, with_types

        est = self._estimates.get(s.job_id)
        est = new_estimate(s.job, types) if est is None else with_types(est, types)
        self._estimates[s.job_id] = est
        return est

    def _observe(self, s: JobStatus, ctx: RoundContext) -> None:
        from baselines.sia import estimate as sg
        from hadar.workloads.pollux_throughput import is_pollux_job

        if not is_pollux_job(s.job):
            return
        est = self._estimate(s, ctx.cluster.gpu_types)
        placement = ctx.current.get((s.job_id, 0))
        batch = self._batch.get(s.job_id)
        if not placement or not batch:
            return
        per_node = tuple(sum(per.values()) for per in placement.values() if sum(per.values()) > 0)
        gtype = min(t for per in placement.values() for t, c in per.items() if c > 0)
        point, grad = sg.simulated_point(
            est, gtype, per_node, batch, sg.progress_of(s.job, s.done_steps)
        )
        self._estimates[s.job_id] = sg.observe(est, gtype, point, grad)

    def _goodputs(
        self, s: JobStatus, ctx: RoundContext, configs: tuple[Configuration, ...]
    ) -> np.ndarray:
        """``[config]`` the job's estimated goodput (0: not allowed)."""
        from baselines.sia import estimate as sg
        from hadar.workloads.pollux_throughput import is_pollux_job

        cluster = ctx.cluster
        types = cluster.gpu_types
        lo, hi = s.job.gpu_range
        hi = min(hi, cluster.total_gpus, MAX_GPUS_PER_JOB)
        out = np.zeros(len(configs))
        if is_pollux_job(s.job):
            est = self._estimate(s, types)
            hi = min(hi, sg.max_useful_gpus(est))
            if self.config.explore:
                hi = min(hi, max(sg.exploration_limit(est), lo))
            for t, gtype in enumerate(types):
                idx = [i for i, c in enumerate(configs) if c.gpu_type == t and lo <= c.gpus <= hi]
                if idx:
                    nodes = np.array([configs[i].nodes for i in idx])
                    gpus = np.array([configs[i].gpus for i in idx])
                    out[idx] = sg.goodputs(est, gtype, types, nodes, gpus)
            return out
        cons, unc = ctx.throughput.cell_rates(s.job, cluster)
        width = max(s.job.num_gpus, 1)
        for i, c in enumerate(configs):
            if not lo <= c.gpus <= hi:
                continue
            has = cluster.capacity[:, c.gpu_type] > 0
            rates = unc if c.nodes > 1 else cons
            out[i] = float(rates[has, c.gpu_type].max()) * c.gpus / width if has.any() else 0.0
        return out

    def _restart_factor(self, s: JobStatus, ctx: RoundContext) -> float:
        delay = s.job.restart_s if s.job.restart_s is not None else ctx.restart_penalty_s
        age = max(ctx.now - s.job.arrival, 0.0)
        lost = self._restarts.get(s.job_id, 0) * delay
        return max(age - lost, 0.0) / (age + delay) if age + delay > 0 else 1.0

    def _choose_batch(self, s: JobStatus, cfg: Configuration, types: tuple[str, ...]) -> int | None:
        from baselines.sia import estimate as sg
        from hadar.workloads.pollux_throughput import is_pollux_job

        if s.job.batch_range is None:
            return None
        if not is_pollux_job(s.job):
            batch = s.job.spec.get("batch_size")
            return int(batch) if batch is not None else None
        est = self._estimates[s.job_id]
        total = sg.best_batch(est, types[cfg.gpu_type], types, cfg.nodes, cfg.gpus)
        lo, hi = s.job.batch_range
        batch = int(min(max(total, lo), hi))
        self._batch[s.job_id] = batch
        return batch


def _config_of(
    placement: Placement | None, cluster: Cluster, configs: tuple[Configuration, ...]
) -> int | None:
    """The index of the configuration ``placement`` has (None: none or not one of them)."""
    if not placement:
        return None
    types = {t for per in placement.values() for t, c in per.items() if c > 0}
    if len(types) != 1:
        return None
    t = cluster.type_index.get(next(iter(types)))
    nodes = sum(1 for per in placement.values() if sum(per.values()) > 0)
    gpus = sum(sum(per.values()) for per in placement.values())
    for i, c in enumerate(configs):
        if (c.gpu_type, c.nodes, c.gpus) == (t, nodes, gpus):
            return i
    return None


def _place(
    jobs: list[JobStatus],
    chosen: np.ndarray,
    configs: tuple[Configuration, ...],
    ctx: RoundContext,
) -> dict[int, Placement]:
    """Placements of the jobs the ILP allocated: unchanged configurations keep their GPUs; the
    others, largest first (then job order), take whole free nodes or the best-fitting node."""
    cluster = ctx.cluster
    free = cluster.capacity.copy()
    out: dict[int, Placement] = {}
    moving: list[int] = []
    for j, s in enumerate(jobs):
        k = int(chosen[j])
        if k < 0:
            continue
        held = ctx.current.get((s.job_id, 0))
        if held and _config_of(held, cluster, configs) == k:
            y = cluster.placement_matrix(held)
            if np.all(y <= free):
                free -= y
                out[j] = held
                continue
        moving.append(j)
    moving.sort(key=lambda j: (-configs[int(chosen[j])].gpus, j))
    for j in moving:
        c = configs[int(chosen[j])]
        col = free[:, c.gpu_type]
        size = int(cluster.capacity[:, c.gpu_type].max())
        y = np.zeros_like(free)
        if c.nodes > 1:
            whole = np.flatnonzero(col == size)
            if whole.size < c.nodes:
                continue
            y[whole[: c.nodes], c.gpu_type] = size
        else:
            fits = np.flatnonzero(col >= c.gpus)
            if fits.size == 0:
                continue
            node = int(fits[np.argmin(col[fits])])  # best fit, first node on ties
            y[node, c.gpu_type] = c.gpus
        free -= y
        out[j] = cluster.placement_from_matrix(y)
    return out
