"""The Hadar policy: Algorithm 1, one round at a time.

Each round:

1. Running jobs keep their placement (the paper's "only newly arrived or preempted jobs are
   allocated"); a running job whose node disappeared is re-queued.
2. Prices are reset from current occupancy with bounds (Eq. 6-7) over the jobs known now.
3. **DP** (Algorithm 2) over a window of the queue: the ``window`` jobs with the best standalone
   payoff, kept in queue order (arrival, id). Jobs with no positive standalone payoff cannot be
   admitted later in the round either (prices only rise), so they are left out of the window.
4. **Greedy remainder**: eligible jobs outside the window, best standalone payoff first, each
   admitted if its payoff at the now-current prices is still positive.
5. **Backfill** (knob ``backfill``, default on): GPUs the price function left idle are offered,
   at zero price, to the remaining queued jobs, highest utility first. *Decision*: in Hadar a
   job whose payoff is not positive waits rather than leaves; a GPU left idle this round earns
   nothing, and every price is reset next round, so filling it only shortens the queue.
6. **Upgrades** (knob ``replan``, default ``upgrade``): a running job is moved only onto GPUs
   still idle after 3-5 and only when its estimated completion improves by more than
   ``upgrade_min_gain_s`` after paying the checkpoint-restart penalty. *Decision*: this keeps
   the paper's low churn (no preemption of running jobs by queued ones) while letting a job that
   started on slow GPUs move to fast GPUs that fall idle at the end of a trace.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from hadar.jobs import JobStatus, Placement
from hadar.policy import Assignment, Policy, RoundContext, RoundPlan
from hadar.valuation import JobValuation, queue_entry, round_price_bounds, single_node, value_jobs
from primal_dual.dp import CandidateCache, QueueEntry, plan_queue
from primal_dual.find_alloc import Candidate, best_candidate
from primal_dual.utility import make_utility


@dataclass(frozen=True)
class HadarConfig:
    """Knobs of the Hadar policy (defaults documented in docs/hadar.md)."""

    utility: str = "sigmoid"
    gamma2: float = 5.0
    eta: float = 1.0
    hold_cost: bool = True
    window_factor: float = 2.0
    window_min: int = 16
    window_max: int = 64
    beam: int = 32
    backfill: bool = True
    replan: str = "upgrade"
    upgrade_min_gain_s: float = 360.0
    single_node: bool = False
    """Place every job on one node when its gang fits on some node (HadarE's per-node copies)."""

    def __post_init__(self) -> None:
        if self.replan not in ("never", "upgrade"):
            raise ValueError("replan must be 'never' or 'upgrade'")
        if self.window_min < 1 or self.window_max < self.window_min:
            raise ValueError("need 1 <= window_min <= window_max")


class HadarPolicy(Policy):
    """Task-level heterogeneity-aware primal-dual scheduling (Hadar)."""

    name = "hadar"

    def __init__(self, config: HadarConfig | None = None, **knobs: object) -> None:
        self.config = config or HadarConfig(**knobs)  # type: ignore[arg-type]
        params = {"gamma2": self.config.gamma2} if self.config.utility == "sigmoid" else {}
        self.utility = make_utility(self.config.utility, **params)

    def decide(self, ctx: RoundContext) -> RoundPlan:
        running, queued = split_running(ctx)
        vals = value_jobs(ctx, ctx.jobs)
        by_id = {v.status.job_id: v for v in vals}
        free = ctx.cluster.capacity.copy()
        for placement in running.values():
            free -= ctx.cluster.placement_matrix(placement)
        bounds = round_price_bounds(vals, ctx, self.utility, self.config.eta)
        entries = [
            queue_entry(single_node(by_id[s.job_id], ctx.cluster) if self.config.single_node else by_id[s.job_id],
                        ctx, self.utility, self.config.hold_cost)
            for s in queued
        ]
        placed, info = admit(entries, free, ctx, bounds_cache=CandidateCache(ctx.cluster.capacity, bounds), config=self.config)
        if self.config.replan == "upgrade":
            running, moved = upgrade_running(running, by_id, free, ctx, self.config.upgrade_min_gain_s)
            info["upgraded"] = moved
        assignments = [Assignment(j, p) for j, p in sorted(running.items())]
        assignments += [Assignment(key, ctx.cluster.placement_from_matrix(c.alloc)) for key, c in placed]
        return RoundPlan(tuple(sorted(assignments, key=lambda a: a.job_id)), info)


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
        ctx.cluster.node(n).gpus.get(k, 0) >= c for n, per in placement.items() for k, c in per.items()
    )


def admit(
    entries: list[QueueEntry],
    free: np.ndarray,
    ctx: RoundContext,
    bounds_cache: CandidateCache,
    config: HadarConfig,
) -> tuple[list[tuple[object, Candidate]], dict[str, object]]:
    """Steps 3-5 of the round: DP window, greedy remainder, backfill. Mutates ``free``."""
    cache = bounds_cache
    key = free.tobytes()
    total_free = int(free.sum())
    standalone: list[tuple[float, int]] = []
    for i, e in enumerate(entries):
        best = cache.best(e, free, key) if total_free >= e.request.num_gpus else None
        if best is not None:
            standalone.append((best[1], i))
    min_w = min((entries[i].request.num_gpus for _, i in standalone), default=1)
    k = int(np.clip(math.ceil(config.window_factor * total_free / min_w), config.window_min, config.window_max))
    ranked = sorted(standalone, key=lambda t: (-t[0], t[1]))
    window_idx = sorted(i for _, i in ranked[:k])
    result = plan_queue([entries[i] for i in window_idx], free, cache, beam=config.beam)
    placed: list[tuple[object, Candidate]] = []
    taken: set[int] = set()

    def commit(i: int, cand: Candidate) -> None:
        nonlocal key, total_free
        placed.append((entries[i].key, cand))
        taken.add(i)
        free[...] = free - cand.alloc
        key = free.tobytes()
        total_free -= cand.alloc.sum()

    for wi, cand, _ in result.chosen:
        commit(window_idx[wi], cand)
    greedy = 0
    for _, i in ranked[k:]:
        if total_free >= entries[i].request.num_gpus:
            best = cache.best(entries[i], free, key)
            if best is not None:
                commit(i, best[0])
                greedy += 1
    backfilled = 0
    if config.backfill:
        zero = CandidateCache(ctx.cluster.capacity, None)

        def best_utility(i: int) -> Candidate | None:
            if total_free < entries[i].request.num_gpus:
                return None
            b = best_candidate(zero.candidates(entries[i], free, key), lambda c, e=entries[i]: e.utility(c.rate))
            return None if b is None else b[0]

        rest = [i for i in range(len(entries)) if i not in taken]
        scored = []
        for i in rest:
            c = best_utility(i)
            if c is not None:
                scored.append((-entries[i].utility(c.rate), i))
        for _, i in sorted(scored):
            c = best_utility(i)
            if c is not None:
                commit(i, c)
                backfilled += 1
    info: dict[str, object] = {
        "queue": len(entries),
        "eligible": len(standalone),
        "window": len(window_idx),
        "dp_admitted": len(result.chosen),
        "dp_exact": result.exact and len(window_idx) == len(standalone),
        "dp_states": result.states,
        "greedy_admitted": greedy,
        "backfilled": backfilled,
    }
    return placed, info


def upgrade_running(
    running: Mapping[int, Placement],
    vals: Mapping[int, JobValuation],
    free: np.ndarray,
    ctx: RoundContext,
    min_gain_s: float,
) -> tuple[dict[int, Placement], int]:
    """Move running jobs onto idle GPUs when that finishes them ``min_gain_s`` sooner. Mutates ``free``."""
    out = dict(running)
    moved = 0
    zero = CandidateCache(ctx.cluster.capacity, None)
    for job_id in sorted(running, key=lambda j: (vals[j].status.job.arrival, j)):
        v = vals[job_id]
        own = ctx.cluster.placement_matrix(running[job_id])
        old_rate = ctx.throughput.rate(v.status.job, running[job_id], ctx.cluster)
        if old_rate <= 0 or not free.any():
            continue
        pool = free + own
        cands = zero.candidates(
            QueueEntry(job_id, v.request, ("upgrade", job_id), lambda r: r, lambda r: 1.0), pool
        )
        if not cands:
            continue
        best = max(cands, key=lambda c: (c.rate, -c.nodes))
        rem = v.status.remaining_steps
        gain = rem / old_rate - (rem / best.rate + ctx.restart_penalty)
        if gain > min_gain_s and not np.array_equal(best.alloc, own):
            out[job_id] = ctx.cluster.placement_from_matrix(best.alloc)
            free += own - best.alloc
            moved += 1
    return out, moved
