"""Tiresias (Gu et al., NSDI 2019): discretised two-dimensional least-attained-service.

Heterogeneity-unaware: every GPU counts the same. Attained service = GPUs x seconds executed
(``JobStatus.attained_service``). Two priority queues (the Hadar paper's setting): a job is in
the high queue until its attained service reaches ``threshold`` GPU-seconds, then in the low
queue for good (PromoteKnob disabled, so it is never promoted back). Within a queue, jobs are
served first-come first-served by arrival.

Each round (preemption happens only at round boundaries): walk the jobs high queue first, and
admit a job whenever its W GPUs (any types) are still free, skipping those that do not fit
(Tiresias' simulator does the same). Jobs not admitted are preempted. Admitted jobs that were
running keep their GPUs; the others are placed largest gang first, consolidated on one node when
possible, best-fit node first (ties broken by a fixed pseudo-random node order, ``seed``, so
that the order of the cluster file, e.g. fast GPUs first, cannot favour a type). A job spread
over types runs at the bottleneck rate. The only type information used is feasibility: a job
never goes on GPUs where it cannot run at all (rate 0); an admitted job left without such GPUs
is skipped and later jobs may take the GPUs instead.

Default threshold 3,250 GPU-seconds: the first queue limit of Tiresias' published simulator
(``dlas-gpu``), about 0.9 GPU-hour, which also separates the paper's Small jobs (< 1 GPU-hour)
from the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hadar.core.jobs import JobStatus
from hadar.placement import check_seed, node_rank, runnable_cells, unaware_placement
from hadar.policy import (
    Assignment,
    LineStyle,
    Policy,
    PolicyInfo,
    RoundContext,
    RoundPlan,
    register_policy,
)
from hadar.running import split_running

DEFAULT_THRESHOLD_GPU_S = 3250.0


@dataclass(frozen=True)
class TiresiasConfig:
    threshold: float = DEFAULT_THRESHOLD_GPU_S
    """Attained service (GPU-seconds) at which a job is demoted to the low-priority queue."""
    seed: int = 0
    """Seed of the node tie-break order used by placement."""

    def __post_init__(self) -> None:
        if self.threshold < 0:
            raise ValueError("threshold must be >= 0")
        check_seed(self.seed)


@register_policy
class TiresiasPolicy(Policy):
    """2D-LAS with two queues, PromoteKnob off, heterogeneity-unaware, preemptive per round."""

    name = "tiresias"
    info = PolicyInfo(
        title="Tiresias",
        colour="tab:green",
        line=LineStyle("-.", "D", 1.6),
        defaults=frozenset({"compare", "compare-elastic", "load-sweep"}),
        rank=40,
    )
    config_class = TiresiasConfig

    def __init__(self, config: TiresiasConfig | None = None, **knobs: Any) -> None:
        self.config = config or TiresiasConfig(**knobs)

    def queue_of(self, status: JobStatus) -> int:
        """0 (high) while attained service < threshold, else 1 (low)."""
        return 0 if status.attained_service < self.config.threshold else 1

    def decide(self, ctx: RoundContext) -> RoundPlan:
        cluster = ctx.cluster
        order = sorted(ctx.jobs, key=lambda s: (self.queue_of(s), s.job.arrival, s.job_id))
        free_count = cluster.total_gpus
        admitted: list[JobStatus] = []
        for s in order:
            if s.job.num_gpus <= free_count:
                admitted.append(s)
                free_count -= s.job.num_gpus
        running, _ = split_running(ctx)
        free = cluster.capacity.copy()
        out: dict[int, Assignment] = {}
        for s in admitted:
            if s.job_id in running:
                free -= cluster.placement_matrix(running[s.job_id])
                out[s.job_id] = Assignment(s.job_id, running[s.job_id])
        rank = node_rank(len(cluster.nodes), self.config.seed)
        for s in sorted(
            (s for s in admitted if s.job_id not in out), key=lambda s: -s.job.num_gpus
        ):
            self._place(s, free, out, ctx, rank)
        # A job admitted by count may find no GPU it can run on (a type where it has rate 0):
        # then, as Tiresias skips jobs that do not fit, later jobs may use the GPUs left.
        for s in order:
            if s.job_id not in out and int(free.sum()) >= s.job.num_gpus:
                self._place(s, free, out, ctx, rank)
        high = sum(1 for s in ctx.jobs if self.queue_of(s) == 0)
        info = {
            "high_queue": high,
            "low_queue": len(ctx.jobs) - high,
            "preempted": sum(1 for j in running if j not in out),
        }
        return RoundPlan(tuple(out[j] for j in sorted(out)), info)

    @staticmethod
    def _place(
        s: JobStatus,
        free: np.ndarray,
        out: dict[int, Assignment],
        ctx: RoundContext,
        rank: np.ndarray,
    ) -> None:
        alloc = unaware_placement(
            free, runnable_cells(s.job, ctx.cluster, ctx.throughput), s.job.num_gpus, rank
        )
        if alloc is not None:
            free -= alloc
            out[s.job_id] = Assignment(s.job_id, ctx.cluster.placement_from_matrix(alloc))
