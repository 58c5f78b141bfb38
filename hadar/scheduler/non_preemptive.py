"""Hadar's non-preemptive round (``replan=never`` or ``upgrade``, the legacy configuration):
running jobs keep their GPUs; the queued jobs are admitted onto the GPUs they leave free (DP
window, greedy remainder, backfill) and, with ``upgrade``, a running job moves onto GPUs still
idle when that finishes it ``upgrade_min_gain_s`` sooner, restart included."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hadar.policy import Assignment, RoundContext, RoundPlan
from hadar.running import split_running
from hadar.scheduler.steps import admit, job_id_of
from hadar.valuation import queue_entry, single_node, value_jobs

if TYPE_CHECKING:
    from hadar.scheduler import HadarPolicy


def decide(policy: HadarPolicy, ctx: RoundContext) -> RoundPlan:
    """One non-preemptive round of ``policy`` (its utility already set for ``ctx``'s round)."""
    running, queued = split_running(ctx)
    vals = value_jobs(ctx, ctx.jobs)
    by_id = {v.status.job_id: v for v in vals}
    free = ctx.cluster.capacity.copy()
    for placement in running.values():
        free -= ctx.cluster.placement_matrix(placement)
    queued_vals = [
        single_node(by_id[s.job_id], ctx.cluster) if policy.config.single_node else by_id[s.job_id]
        for s in queued
    ]
    entries = [queue_entry(v, ctx, policy.utility, policy.config.hold_cost) for v in queued_vals]
    cache = policy._prices(vals, queued_vals, entries, ctx, free)
    placed, info = admit(entries, free, ctx, bounds_cache=cache, config=policy.config)
    if policy.config.replan == "upgrade":
        running, moved = policy.upgrade(running, by_id, free, ctx)
        info["upgraded"] = moved
    assignments = [Assignment(j, p) for j, p in sorted(running.items())]
    assignments += [
        Assignment(job_id_of(key), ctx.cluster.placement_from_matrix(c.alloc)) for key, c in placed
    ]
    return RoundPlan(tuple(sorted(assignments, key=lambda a: a.job_id)), info)
