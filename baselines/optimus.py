"""Optimus+Oracle (Peng et al., EuroSys 2018) as the Pollux paper ran it (§5.1): each job keeps
its own batch size (Pollux's TunedJobs) and Optimus decides only its GPU count, knowing exactly
how much work each job has left (the "Oracle": Pollux ran every job ahead of time instead of
fitting Optimus' convergence curve) and predicting its speed with the run's throughput model
(Pollux replaced Optimus' parameter-server model with its own).

Each round, as the official Pollux simulator's ``optimus.py`` does it:

1. every job, oldest first, gets one GPU (a rigid job: its gang) while GPUs remain (the others
   wait);
2. the remaining GPUs go one at a time to the job whose remaining time would shrink most with
   one more: ``remaining work x (1 / rate(k) - 1 / rate(k + 1))``, up to the job's most useful
   GPU count;
3. a job whose count did not change keeps its GPUs; the others are placed on the fewest nodes.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

import numpy as np

from hadar.core.cluster import Cluster
from hadar.core.jobs import JobStatus, Placement
from hadar.placement import fewest_nodes, runnable_cells
from hadar.policy import Assignment, Policy, PolicyInfo, RoundContext, RoundPlan, register_policy
from hadar.running import split_running


@dataclass(frozen=True)
class OptimusConfig:
    max_gpus: int = 64
    """The most GPUs one job may get (the official simulator's cap)."""

    def __post_init__(self) -> None:
        if self.max_gpus < 1:
            raise ValueError("max_gpus must be >= 1")


def _compact(cluster: Cluster, k: int) -> Placement:
    """``k`` GPUs on the fewest nodes of the cluster's largest nodes (for predicting a rate)."""
    alloc = np.zeros_like(cluster.capacity)
    left = k
    for h in np.argsort(-cluster.capacity.sum(axis=1), kind="stable"):
        for t in range(cluster.capacity.shape[1]):
            take = min(left, int(cluster.capacity[h, t]))
            alloc[h, t] += take
            left -= take
        if left == 0:
            break
    return cluster.placement_from_matrix(alloc)


@register_policy
class OptimusPolicy(Policy):
    """Greedy GPU counts by marginal reduction of remaining time, batch sizes fixed."""

    name = "optimus"
    config_class = OptimusConfig
    info = PolicyInfo(title="Optimus+Oracle", colour="#e7ba52", rank=55)  # tab20b gold

    def __init__(self, config: OptimusConfig | None = None, **knobs: Any) -> None:
        self.config = config or OptimusConfig(**knobs)

    def counts(self, ctx: RoundContext) -> dict[int, int]:
        """Each job's GPU count this round (steps 1-2)."""
        cluster = ctx.cluster
        free = cluster.total_gpus
        order = sorted(ctx.jobs, key=lambda s: (s.job.arrival, s.job_id))
        counts: dict[int, int] = {}
        for s in order:  # each job's minimum (1 for an elastic job, its gang for a rigid one)
            lo = s.job.gpu_range[0]
            if lo <= free:
                counts[s.job_id] = lo
                free -= lo
        by_id = {s.job_id: s for s in order}
        cache: dict[tuple[int, int], float] = {}

        def rate(s: JobStatus, k: int) -> float:
            key = (s.job_id, k)
            if key not in cache:
                run = ctx.throughput.run_rate(s.job, _compact(cluster, k), cluster, s.done_steps)
                cache[key] = run.rate
            return cache[key]

        def gain(s: JobStatus, k: int) -> float:
            hi = min(s.job.gpu_range[1], self.config.max_gpus, cluster.total_gpus)
            if k + 1 > hi:
                return 0.0
            now, more = rate(s, k), rate(s, k + 1)
            if now <= 0 or more <= 0:
                return 0.0
            return s.remaining_steps * (1.0 / now - 1.0 / more)

        heap = [(-gain(by_id[j], k), j) for j, k in counts.items()]
        heapq.heapify(heap)
        while free > 0 and heap:
            g, j = heapq.heappop(heap)
            if -g <= 0:
                break
            counts[j] += 1
            free -= 1
            heapq.heappush(heap, (-gain(by_id[j], counts[j]), j))
        return counts

    def decide(self, ctx: RoundContext) -> RoundPlan:
        cluster = ctx.cluster
        counts = self.counts(ctx)
        running, _ = split_running(ctx)
        free = cluster.capacity.copy()
        out: dict[int, Assignment] = {}
        for j, k in counts.items():
            held = running.get(j)
            if held is not None and int(cluster.placement_matrix(held).sum()) == k:
                free -= cluster.placement_matrix(held)
                out[j] = Assignment(j, held)
        by_id = {s.job_id: s for s in ctx.jobs}
        for j in sorted((j for j in counts if j not in out), key=lambda j: (counts[j], j)):
            s = by_id[j]
            alloc = fewest_nodes(free, runnable_cells(s.job, cluster, ctx.throughput), counts[j])
            if alloc is not None:
                free -= alloc
                out[j] = Assignment(j, cluster.placement_from_matrix(alloc))
        info = {"jobs": len(ctx.jobs), "placed": len(out), "gpus_used": int(sum(counts.values()))}
        return RoundPlan(tuple(out[j] for j in sorted(out)), info)
