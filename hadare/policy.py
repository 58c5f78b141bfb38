"""The HadarE policy: Hadar's round decision for the jobs, then forked copies on every node
that would otherwise idle, with the remaining steps split by throughput.

Each round (all copies restart from the job's consolidated parameters, so nothing is pinned):

1. **Primary copies** — Hadar's admission (prices, DP over the queue, greedy, backfill) over the
   jobs, with placements restricted to one node per copy. A job whose gang is larger than any
   node runs as one multi-node copy, as under Hadar.
2. **Forked copies** — while a node has room for a job that is not on it yet and has copies
   left (``copies`` per job, default one per node), the job that would otherwise finish last
   (largest remaining steps / planned rate) gets a copy on its fastest such node. This is what
   keeps every node busy (the paper's Theorem 3) and balances finishing times.
3. **Step split** — a job's remaining steps are divided among its copies in proportion to their
   throughputs; a job that can finish this round keeps only its fastest copies that suffice,
   and the freed nodes go back to step 2.

Copy ``i`` of a job always runs on node ``i - 1`` of the cluster file (stable copy ids for the
Job Tracker: ``job_id * max_job_count + i``). A copy pays the checkpoint-restart penalty unless
it continues alone on the node where the job alone ran last round; every round with more than
one copy pays ``aggregation_overhead_s`` (parameter averaging and distribution, a knob).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from hadar.core.cluster import Cluster
from hadar.core.defaults import SIMULATED
from hadar.core.jobs import Placement
from hadar.policy import (
    Assignment,
    LineStyle,
    Policy,
    PolicyInfo,
    RoundContext,
    RoundPlan,
    register_policy,
)
from hadar.scheduler import HadarConfig, HadarPolicy
from hadar.valuation import JobValuation, value_jobs
from hadare.step_split import CopySlot, finishing_subset, split_steps
from tracker.ids import DEFAULT_MAX_JOB_COUNT


def for_primary_copies(config: HadarConfig) -> HadarConfig:
    """``config`` without the Hadar knobs HadarE's primary-copy planning leaves off (``--policy-opt
    hadare:tail_percentile=99`` or ``hadare:type_matching=true`` turns them on): with the tail
    guard and type matching HadarE's average JCT on `philly-480` rose on every seed (seed 0: 2.29
    -> 2.34 h, seed 1: 2.47 -> 2.81 h) and its TTD moved both ways (seed 1: 24.30 -> 19.53 h,
    seed 4: 20.10 -> 20.99 h); its copies already run on every type."""
    return replace(config, tail_percentile=None, type_matching=False)


@dataclass(frozen=True)
class HadarEConfig:
    copies: int | None = None
    """Copies per job; None = one per node of the cluster."""
    aggregation_overhead_s: float = SIMULATED.aggregation_overhead_s
    """Knob: seconds of each round every copy of a forked job spends on averaging (see
    :class:`hadar.core.defaults.DriverDefaults`); ``hadar run`` passes its own figure."""
    max_job_count: int = DEFAULT_MAX_JOB_COUNT
    hadar: HadarConfig = for_primary_copies(HadarConfig())

    @classmethod
    def preset(cls, name: str) -> HadarEConfig:
        """HadarE over a named Hadar configuration (``default`` or ``legacy``)."""
        return cls(hadar=for_primary_copies(HadarConfig.preset(name)))


@register_policy
class HadarEPolicy(Policy):
    """Hadar with job forking (HadarE)."""

    name = "hadare"
    info = PolicyInfo(
        title="HadarE",
        colour="tab:purple",
        line=LineStyle("--", "s", 1.5),  # on top of Hadar's wide solid line
        forking=True,
        defaults=frozenset({"compare-elastic", "load-sweep"}),
        rank=20,
    )
    config_class = HadarEConfig

    def __init__(self, config: HadarEConfig | None = None, **knobs: Any) -> None:
        self.config = config or HadarEConfig(**knobs)
        # Hadar's endgame plans rounds without forked copies (hadar/scheduler/endgame.py)
        self._hadar = HadarPolicy(replace(self.config.hadar, single_node=True, endgame=False))

    def state(self) -> dict[str, Any]:
        """The inner Hadar policy's state (its finish-time fairness bookkeeping)."""
        return self._hadar.state()

    def restore(self, state: Mapping[str, Any]) -> None:
        self._hadar.restore(state)

    def decide(self, ctx: RoundContext) -> RoundPlan:
        cluster = ctx.cluster
        n_copies = self.config.copies or len(cluster.nodes)
        by_id = {v.status.job_id: v for v in value_jobs(ctx, ctx.jobs)}
        primary = self._hadar.decide(replace(ctx, current=_primary_copies(ctx)))
        copies: dict[int, dict[str, Placement]] = {}
        free = cluster.capacity.copy()
        for a in primary.assignments:
            copies.setdefault(a.job_id, {})[min(a.placement)] = a.placement
            free -= cluster.placement_matrix(a.placement)
        forked = 0
        agg = self.config.aggregation_overhead_s
        finishing: set[int] = set()
        for _ in range(4):
            others = {j: v for j, v in by_id.items() if j not in finishing}
            forked += _fork(copies, others, free, ctx, n_copies, agg)
            if not _trim(copies, by_id, free, ctx, self._seconds(ctx, copies), finishing):
                break
        # nodes nobody else can use speed up the jobs finishing this round
        forked += _fork(copies, {j: by_id[j] for j in finishing}, free, ctx, n_copies, agg)
        assignments = self._assignments(copies, by_id, ctx)
        info = dict(primary.info, forked_copies=forked, copies=len(assignments))
        return RoundPlan(tuple(assignments), info)

    def _seconds(
        self, ctx: RoundContext, copies: Mapping[int, Mapping[str, Placement]]
    ) -> dict[int, float]:
        """Usable training seconds of a copy of each job this round (worst case: with penalty)."""
        return {
            j: max(0.0, ctx.round_s - self._overhead(ctx, j, len(c), moved=True))
            for j, c in copies.items()
        }

    def _overhead(self, ctx: RoundContext, job_id: int, n_copies: int, moved: bool) -> float:
        """Seconds a copy does not train: the restart penalty when the node did not run this job
        last round, and the aggregation overhead whenever the job is forked. A job alone on the
        node it ran on alone last round continues without either."""
        started = ctx.status(job_id).done_steps > 0
        restart = ctx.restart_penalty_s if (moved and started) else 0.0
        if n_copies > 1:
            return restart + self.config.aggregation_overhead_s
        was_forked = sum(1 for k in ctx.current if k[0] == job_id) > 1
        return (
            restart
            if not was_forked
            else max(restart, self.config.aggregation_overhead_s if started else 0.0)
        )

    def _assignments(
        self,
        copies: dict[int, dict[str, Placement]],
        vals: Mapping[int, JobValuation],
        ctx: RoundContext,
    ) -> list[Assignment]:
        out: list[Assignment] = []
        for job_id in sorted(copies):
            per_node = copies[job_id]
            st = vals[job_id].status
            slots = []
            for node, placement in sorted(
                per_node.items(), key=lambda item: ctx.cluster.node_index[item[0]]
            ):
                copy = ctx.cluster.node_index[node] + 1
                moved = ctx.current.get((job_id, copy)) != placement
                overhead = self._overhead(ctx, job_id, len(per_node), moved)
                rate = ctx.throughput.rate(st.job, placement, ctx.cluster)
                slots.append(
                    (copy, placement, overhead, CopySlot(node, rate, ctx.round_s - overhead))
                )
            budgets = split_steps([s[3] for s in slots], st.remaining_steps)
            for copy, placement, overhead, slot in slots:
                out.append(
                    Assignment(
                        job_id,
                        placement,
                        copy=copy,
                        step_budget=budgets[slot.node],
                        overhead_s=overhead,
                        restart=False,
                    )
                )
        return out


def _primary_copies(ctx: RoundContext) -> dict[tuple[int, int], Placement]:
    """Each job's fastest copy of last round, as Hadar's running placement (copy 0): the job
    keeps that node, as Hadar keeps running jobs; its other copies are re-planned."""
    best: dict[int, tuple[float, Placement]] = {}
    up = set(ctx.cluster.node_names)
    for (job_id, _), placement in ctx.current.items():
        if not set(placement) <= up:  # its node left the cluster
            continue
        try:
            job = ctx.status(job_id).job
        except KeyError:
            continue
        rate = ctx.throughput.rate(job, placement, ctx.cluster)
        if job_id not in best or rate > best[job_id][0]:
            best[job_id] = (rate, placement)
    return {(j, 0): p for j, (_, p) in best.items()}


def _worth_forking(
    v: JobValuation,
    have: Mapping[str, Placement],
    cell: tuple[int, int],
    ctx: RoundContext,
    overhead: float,
) -> bool:
    """A new copy must add more steps this round than the aggregation overhead it imposes on the
    job's existing copies (a T400 next to an RTX 3090 may not)."""
    if not have:
        return True
    h, k = cell
    job = v.status.job
    rates = [ctx.throughput.rate(job, p, ctx.cluster) for p in have.values()]
    new_rate = float(v.request.rates_cons[h, k])
    round_s = ctx.round_s
    before = sum(rates) * (round_s - (overhead if len(have) > 1 else 0.0))
    after = (sum(rates) + new_rate) * (round_s - overhead)
    return after > before


def _fork(
    copies: dict[int, dict[str, Placement]],
    vals: Mapping[int, JobValuation],
    free: np.ndarray,
    ctx: RoundContext,
    n_copies: int,
    overhead: float,
) -> int:
    """Step 2: add copies on nodes with room, to the job that would finish last. Mutates."""
    cluster = ctx.cluster
    added = 0
    while True:
        best: tuple[float, int, int, int] | None = None  # (-projected finish, job, node, type)
        for job_id, v in vals.items():
            have = copies.get(job_id, {})
            if len(have) >= n_copies or any(len(p) > 1 for p in have.values()):
                continue
            planned = sum(ctx.throughput.rate(v.status.job, p, cluster) for p in have.values())
            finish = v.status.remaining_steps / planned if planned > 0 else np.inf
            node_choice = _fastest_free_node(v, free, have, cluster)
            if node_choice is None or not _worth_forking(v, have, node_choice, ctx, overhead):
                continue
            key = (-finish, job_id)
            if best is None or key < (best[0], best[1]):
                best = (-finish, job_id, *node_choice)
        if best is None:
            return added
        _, job_id, h, k = best
        alloc = np.zeros_like(free)
        alloc[h, k] = vals[job_id].status.job.num_gpus
        free -= alloc
        copies.setdefault(job_id, {})[cluster.node_names[h]] = cluster.placement_from_matrix(alloc)
        added += 1


def _fastest_free_node(
    v: JobValuation, free: np.ndarray, have: Mapping[str, Placement], cluster: Cluster
) -> tuple[int, int] | None:
    """(node, type) cell with W free GPUs where the job is fastest, skipping nodes it is on."""
    cons = v.request.rates_cons
    ok = (free >= v.status.job.num_gpus) & (cons > 0)
    for name in have:
        ok[cluster.node_index[name], :] = False
    if not ok.any():
        return None
    flat = int(np.argmax(np.where(ok, cons, -1.0)))  # first maximum: lowest node on ties
    h, k = divmod(flat, free.shape[1])
    return h, k


def _trim(
    copies: dict[int, dict[str, Placement]],
    vals: Mapping[int, JobValuation],
    free: np.ndarray,
    ctx: RoundContext,
    seconds: Mapping[int, float],
    finishing: set[int],
) -> bool:
    """Step 3's trimming: a job that can finish this round keeps its fastest sufficient copies
    and joins ``finishing``. Returns whether any node was freed. Mutates its arguments."""
    freed = False
    for job_id, per_node in copies.items():
        if job_id in finishing:
            continue
        st = vals[job_id].status
        slots = [
            CopySlot(n, ctx.throughput.rate(st.job, p, ctx.cluster), seconds[job_id])
            for n, p in sorted(per_node.items(), key=lambda np_: ctx.cluster.node_index[np_[0]])
        ]
        if sum(c.capacity for c in slots) < st.remaining_steps:
            continue
        finishing.add(job_id)
        keep = {c.node for c in finishing_subset(slots, st.remaining_steps)}
        for node in [n for n in per_node if n not in keep]:
            free += ctx.cluster.placement_matrix(per_node.pop(node))
            freed = True
    return freed
