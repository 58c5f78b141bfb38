"""YARN's capacity scheduler (YARN-CS) as the Hadar paper uses it: one FIFO queue.

Non-preemptive and gang-scheduled, heterogeneity-unaware: a running job keeps its GPUs until it
finishes. Each round the head of the queue (arrival order) starts as soon as W GPUs of any
types are free, on as few nodes as possible (best-fit node first, ties broken by a fixed
pseudo-random node order, as for Tiresias), and runs at the bottleneck rate of what it got.
No backfilling: when the head does not fit, nothing behind it starts. GPUs on which the head
cannot run at all (rate 0, e.g. out of memory) do not count as free for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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


@dataclass(frozen=True)
class YarnConfig:
    seed: int = 0
    """Seed of the node tie-break order used by placement."""

    def __post_init__(self) -> None:
        check_seed(self.seed)


@register_policy
class YarnCapacityPolicy(Policy):
    """Strict FIFO, non-preemptive, no backfilling."""

    name = "yarn-cs"
    info = PolicyInfo(
        title="YARN-CS",
        colour="tab:red",
        line=LineStyle(":", "v", 1.8),
        defaults=frozenset({"compare", "load-sweep"}),
        rank=50,
    )
    config_class = YarnConfig

    def __init__(self, config: YarnConfig | None = None, **knobs: Any) -> None:
        self.config = config or YarnConfig(**knobs)

    def decide(self, ctx: RoundContext) -> RoundPlan:
        cluster = ctx.cluster
        running, waiting = split_running(ctx)
        free = cluster.capacity.copy()
        out = [Assignment(j, p) for j, p in running.items()]
        for a in out:
            free -= cluster.placement_matrix(a.placement)
        rank = node_rank(len(cluster.nodes), self.config.seed)
        started = 0
        for s in waiting:  # ctx.jobs order: arrival, then id
            alloc = unaware_placement(
                free, runnable_cells(s.job, cluster, ctx.throughput), s.job.num_gpus, rank
            )
            if alloc is None:
                break  # head-of-line blocking: no backfilling
            free -= alloc
            out.append(Assignment(s.job_id, cluster.placement_from_matrix(alloc)))
            started += 1
        info = {"started": started, "waiting": len(waiting) - started}
        return RoundPlan(tuple(sorted(out, key=lambda a: a.job_id)), info)
