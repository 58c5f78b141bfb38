"""The split every round-based policy starts from: the jobs that keep running where they are
(their placement still fits the cluster this round) and the queue. Shared by Hadar, Tiresias and
YARN-CS, so the baselines need not import the Hadar policy module."""

from __future__ import annotations

from hadar.core.jobs import JobStatus, Placement
from hadar.policy import RoundContext


def split_running(ctx: RoundContext) -> tuple[dict[int, Placement], list[JobStatus]]:
    """Running jobs whose placement is still valid on ``ctx.cluster``, and the queue (in order)."""
    nodes = set(ctx.cluster.node_names)
    running: dict[int, Placement] = {}
    queued: list[JobStatus] = []
    for st in ctx.jobs:
        placement = ctx.current.get((st.job_id, 0))
        if placement and set(placement) <= nodes and _fits_types(placement, ctx):
            running[st.job_id] = placement
        else:
            queued.append(st)
    return running, queued


def _fits_types(placement: Placement, ctx: RoundContext) -> bool:
    return all(
        ctx.cluster.node(n).gpus.get(k, 0) >= c
        for n, per in placement.items()
        for k, c in per.items()
    )
