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

import gc
import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np

from hadar.core.jobs import Placement
from hadar.policy import Assignment, Policy, PolicyInfo, RoundContext, RoundPlan, register_policy
from hadar.reference_rates import best_achievable_rate
from hadar.running import split_running
from hadar.valuation import JobValuation, queue_entry, round_price_bounds, single_node, value_jobs
from primal_dual.dp import CandidateCache, QueueEntry, StateKey, plan_queue
from primal_dual.find_alloc import Candidate, JobRequest, best_candidate
from primal_dual.lp_prices import type_prices
from primal_dual.utility import UTILITIES, make_utility

DEFAULT_MAX_WAIT_S = 24 * 3600.0
"""Default starvation bound: a day. It almost never binds on the paper's workloads (where the
utility already favours short jobs) but guarantees that no job is held back indefinitely."""

CRITICAL_TOLERANCE_ROUNDS = 0.01
"""Jobs within 1 % of a round of the TTD bound count as on the critical path (rate estimates are
continuous, so "exactly on the bound" needs a tolerance)."""


@dataclass(frozen=True)
class HadarConfig:
    """Knobs of the Hadar policy (defaults documented in docs/hadar.md)."""

    utility: str = "inverse-remaining"
    gamma2: float = 5.0
    eta: float = 1.0
    hold_cost: bool = False
    window_factor: float = 2.0
    window_min: int = 16
    window_max: int = 64
    beam: int = 32
    backfill: bool = True
    replan: str = "preempt"
    upgrade_min_gain_s: float = 360.0
    price_model: str = "lp"
    """GPU prices: ``exponential`` (Eq. 5-7, rising as a node fills), ``lp`` (per type, the exact
    dual of the round's allocation LP) or ``none`` (0: placement by utility alone)."""
    ttd_guard: bool = True
    """Critical-path rule: a job whose remaining time on its best placement reaches the lower bound
    on the remaining TTD (it would extend the TTD if it waited) is placed first, on a placement
    that keeps it within the bound."""
    critical_slack_rounds: float = 0.0
    """With ``ttd_guard``: also treat as critical the jobs within this many rounds of the bound
    (0 = only the jobs on the critical path, up to a tolerance of 1 % of a round)."""
    max_wait_s: float | None = DEFAULT_MAX_WAIT_S
    """Starvation bound (``replan=preempt``): a job that has not started within this many seconds
    of its arrival is placed before every other job, on its best placement, as soon as its gang
    fits on the cluster (running jobs yield their GPUs if need be). None = no bound."""
    single_node: bool = False
    """Place every job on one node when its gang fits on some node (HadarE's per-node copies)."""

    @classmethod
    def legacy(cls) -> HadarConfig:
        """Hadar as first implemented: OASiS's sigmoid utility, non-preemptive (running jobs keep
        their GPUs and only move onto idle ones), prices times the rounds a job holds its GPUs."""
        return cls(
            utility="sigmoid",
            hold_cost=True,
            replan="upgrade",
            price_model="exponential",
            ttd_guard=False,
        )

    @classmethod
    def preset(cls, name: str) -> HadarConfig:
        """A named configuration: ``default`` or ``legacy``."""
        if name == "default":
            return cls()
        if name == "legacy":
            return cls.legacy()
        raise ValueError(f"unknown preset {name!r} (known: default, legacy)")

    def __post_init__(self) -> None:
        if self.replan not in ("never", "upgrade", "preempt"):
            raise ValueError("replan must be 'never', 'upgrade' or 'preempt'")
        if self.critical_slack_rounds < 0:
            raise ValueError("critical_slack_rounds must be >= 0")
        if self.max_wait_s is not None and not (
            math.isfinite(self.max_wait_s) and self.max_wait_s > 0
        ):
            raise ValueError("max_wait_s must be a positive number of seconds (or None)")
        if self.utility not in UTILITIES:
            raise ValueError(
                f"utility must be one of {', '.join(UTILITIES)} (got {self.utility!r})"
            )
        if self.price_model not in ("exponential", "lp", "none"):
            raise ValueError("price_model must be 'exponential', 'lp' or 'none'")
        if self.beam < 1:
            raise ValueError("beam must be >= 1")
        if self.eta < 1:
            raise ValueError("eta must be >= 1")
        if self.gamma2 <= 0 or self.window_factor <= 0 or self.upgrade_min_gain_s < 0:
            raise ValueError("gamma2 and window_factor must be > 0, upgrade_min_gain_s >= 0")
        if self.window_min < 1 or self.window_max < self.window_min:
            raise ValueError("need 1 <= window_min <= window_max")


@register_policy
class HadarPolicy(Policy):
    """Task-level heterogeneity-aware primal-dual scheduling (Hadar)."""

    name = "hadar"
    info = PolicyInfo(
        title="Hadar",
        colour="tab:blue",
        defaults=frozenset({"compare", "load-sweep", "decision-times"}),
        rank=10,
        reference=True,
    )
    config_class = HadarConfig

    def __init__(self, config: HadarConfig | None = None, **knobs: object) -> None:
        self.config = config or HadarConfig(**knobs)  # type: ignore[arg-type]
        params = {"gamma2": self.config.gamma2} if self.config.utility == "sigmoid" else {}
        self.utility = make_utility(self.config.utility, **params)

    def decide(self, ctx: RoundContext) -> RoundPlan:
        with cyclic_gc_paused():
            return self._decide(ctx)

    def _decide(self, ctx: RoundContext) -> RoundPlan:
        if hasattr(self.utility, "round_s") and self.utility.round_s != ctx.round_length:
            self.utility = replace(self.utility, round_s=ctx.round_length)  # type: ignore[type-var]
        if self.config.replan == "preempt":
            return self._decide_preemptive(ctx)
        running, queued = split_running(ctx)
        vals = value_jobs(ctx, ctx.jobs)
        by_id = {v.status.job_id: v for v in vals}
        free = ctx.cluster.capacity.copy()
        for placement in running.values():
            free -= ctx.cluster.placement_matrix(placement)
        queued_vals = [
            single_node(by_id[s.job_id], ctx.cluster)
            if self.config.single_node
            else by_id[s.job_id]
            for s in queued
        ]
        entries = [queue_entry(v, ctx, self.utility, self.config.hold_cost) for v in queued_vals]
        cache = self._prices(vals, queued_vals, entries, ctx, free)
        placed, info = admit(entries, free, ctx, bounds_cache=cache, config=self.config)
        if self.config.replan == "upgrade":
            running, moved = upgrade_running(
                running, by_id, free, ctx, self.config.upgrade_min_gain_s
            )
            info["upgraded"] = moved
        assignments = [Assignment(j, p) for j, p in sorted(running.items())]
        assignments += [
            Assignment(job_id_of(key), ctx.cluster.placement_from_matrix(c.alloc))
            for key, c in placed
        ]
        return RoundPlan(tuple(sorted(assignments, key=lambda a: a.job_id)), info)

    def _prices(
        self,
        known: list[JobValuation],
        bidders: list[JobValuation],
        entries: list[QueueEntry],
        ctx: RoundContext,
        available: np.ndarray | None = None,
    ) -> CandidateCache:
        """The round's GPU prices (``price_model``): Eq. 5-7 with bounds over the ``known`` jobs,
        the LP dual over the ``bidders`` (the jobs being placed, on the ``available`` GPUs), or none."""
        cap = ctx.cluster.capacity
        if self.config.price_model == "exponential":
            return CandidateCache(
                cap, round_price_bounds(known, ctx, self.utility, self.config.eta)
            )
        if self.config.price_model == "lp":
            per_type = (cap if available is None else available).sum(axis=0)
            return CandidateCache(
                cap,
                None,
                np.broadcast_to(round_type_prices(bidders, entries, ctx, per_type), cap.shape),
            )
        return CandidateCache(cap, None)

    def round_problem(
        self, ctx: RoundContext, held: Mapping[int, np.ndarray]
    ) -> tuple[list[JobValuation], list[QueueEntry], CandidateCache]:
        """What a preemptive round plans over: every job's valuation and DP entry (a running job's
        ``held[job_id]`` placement is its kept candidate) and the round's prices."""
        cfg = self.config
        if hasattr(self.utility, "round_s") and self.utility.round_s != ctx.round_length:
            self.utility = replace(self.utility, round_s=ctx.round_length)  # type: ignore[type-var]
        vals = value_jobs(ctx, ctx.jobs)
        if cfg.single_node:
            vals = [single_node(v, ctx.cluster) for v in vals]
        entries = [
            queue_entry(
                v,
                ctx,
                self.utility,
                cfg.hold_cost,
                keep=held.get(v.status.job_id),
                move_min_gain_s=cfg.upgrade_min_gain_s,
            )
            for v in vals
        ]
        return vals, entries, self._prices(vals, vals, entries, ctx)

    def _decide_preemptive(self, ctx: RoundContext) -> RoundPlan:
        """Every job is (re-)planned each round (Algorithm 1 with preemption):

        1. critical-path jobs (the TTD guard) are placed first, on idle GPUs when that meets their
           deadline;
        2. the DP (Algorithm 2) over all other jobs, running ones included, selects which run;
        3. selected running jobs the DP keeps where they are stay on their GPUs (no restart); the
           others take the placement the DP chose for them where it is still free, else the best
           placement left;
        4. GPUs still idle are backfilled at zero price, highest utility first;
        5. a kept job moves onto faster idle GPUs only when that finishes it ``upgrade_min_gain_s``
           sooner, restart included.
        """
        cfg = self.config
        running, _ = split_running(ctx)
        held = {j: ctx.cluster.placement_matrix(p) for j, p in running.items()}
        vals, entries, cache = self.round_problem(ctx, held)
        free = ctx.cluster.capacity.copy()
        placed: dict[int, Candidate] = {}

        free_gpus = int(free.sum())  # kept equal to free.sum() (a large cluster's sum is costly)

        def take(i: int, cand: Candidate) -> None:
            nonlocal free_gpus
            placed[job_id_of(entries[i].key)] = cand
            cand.take_from(free)
            free_gpus -= cand.gpus

        def idle_for(job_id: object) -> np.ndarray:
            """Free GPUs minus those other running jobs still hold (they may keep them)."""
            out = free.copy()
            for j, y in held.items():
                if j != job_id and j not in placed:
                    out -= y
            return np.maximum(out, 0)

        for i in overdue_jobs(vals, ctx, cfg.max_wait_s):  # the starvation bound comes first
            cands = (
                cache.candidates(entries[i], free)
                if int(free.sum()) >= entries[i].request.num_gpus
                else []
            )
            if cands:  # whatever its payoff: the fastest placement (ties: payoff)
                take(i, max(cands, key=lambda c: (c.rate, entries[i].payoff(c))))
        slack_s = (cfg.critical_slack_rounds + CRITICAL_TOLERANCE_ROUNDS) * ctx.round_length
        crit = (
            [(i, d) for i, d in critical_jobs(vals, ctx, slack_s) if entries[i].key not in placed]
            if cfg.ttd_guard
            else []
        )
        for i, deadline in crit:
            cand = deadline_candidate(
                entries[i], vals[i], idle_for(entries[i].key), cache, deadline, ctx, strict=True
            )
            cand = cand or deadline_candidate(entries[i], vals[i], free, cache, deadline, ctx)
            if cand is not None:
                take(i, cand)
        rest = [i for i in range(len(entries)) if entries[i].key not in placed]
        selected, info = admit(
            [entries[i] for i in rest], free.copy(), ctx, cache, replace(cfg, backfill=False)
        )
        by_key = {entries[i].key: i for i in rest}
        for key, planned in selected:  # running jobs the DP keeps where they are
            i = by_key[key]
            keep = entries[i].keep
            if planned.kept and keep is not None and fits(planned, free):  # planned.alloc is keep
                take(i, planned)
        for key, planned in selected:  # the others where the DP put them, else the best left
            i = by_key[key]
            if key in placed or free_gpus < entries[i].request.num_gpus:
                continue
            if fits(planned, free):
                take(i, planned)
            else:
                best = cache.best(entries[i], free)
                if best is not None:
                    take(i, best[0])
        info["backfilled"] = (
            backfill(
                [e for e in entries if e.key not in placed],
                free,
                ctx,
                lambda e, c: placed.__setitem__(job_id_of(e.key), c),
            )
            if cfg.backfill
            else 0
        )
        kept_jobs = {k: running[k] for k, c in placed.items() if c.kept}
        moved_to, upgraded = upgrade_running(
            kept_jobs, {v.status.job_id: v for v in vals}, free, ctx, cfg.upgrade_min_gain_s
        )
        info.update(
            critical=sum(1 for i, _ in crit if entries[i].key in placed),
            upgraded=upgraded,
            preempted=sum(1 for j in running if j not in placed),
            moved=sum(1 for j in running if j in placed and not placed[j].kept),
        )
        assignments = [
            Assignment(k, moved_to[k] if k in moved_to else placement_of(c, ctx))
            for k, c in placed.items()
        ]
        return RoundPlan(tuple(sorted(assignments, key=lambda a: a.job_id)), info)


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for one decision, then restore its state. A round
    allocates up to millions of short-lived objects (entries, candidates, DP states) that reference
    counting frees (none is part of a cycle), and every collection they would trigger scans the whole
    heap: 15 % of a 100,000-job round's CPU time. Garbage cycles made meanwhile wait for the
    next collection."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@register_policy
class HadarLegacyPolicy(HadarPolicy):
    """Hadar with its original configuration (:meth:`HadarConfig.legacy`), for comparisons."""

    name = "hadar-legacy"
    info = PolicyInfo(title="Hadar (legacy)", colour="tab:cyan", rank=11)

    def __init__(self, config: HadarConfig | None = None, **knobs: object) -> None:
        super().__init__(config or replace(HadarConfig.legacy(), **knobs))  # type: ignore[arg-type]


def round_type_prices(
    vals: list[JobValuation],
    entries: list[QueueEntry],
    ctx: RoundContext,
    gpus_per_type: np.ndarray,
) -> np.ndarray:
    """Per-type prices: the dual of the round's allocation LP over every job (see
    :mod:`primal_dual.lp_prices`); a job's value on a type is its utility at its fastest
    placement on that type alone (kept placement: no restart)."""
    cap = ctx.cluster.capacity
    n_types = cap.shape[1]
    rows: list[list[float]] = []
    per_request: dict[
        int, list[tuple[int, float]]
    ] = {}  # jobs of one class share their request object
    for v, e in zip(vals, entries, strict=True):
        runnable = per_request.get(id(v.request))
        if runnable is None:
            rates = type_rates_alone(v, cap)
            runnable = per_request[id(v.request)] = [
                (int(k), float(rates[k])) for k in np.flatnonzero(rates > 0)
            ]
        kept_type = None if e.keep is None else int(np.argmax(e.keep.sum(axis=0)))
        row = [0.0] * n_types
        for k, rate in runnable:
            u = e.kept_utility if (k == kept_type and e.kept_utility is not None) else e.utility
            row[k] = u(rate)
        rows.append(row)
    values = np.array(rows, dtype=float).reshape(len(vals), n_types)
    gang = np.array([v.request.num_gpus for v in vals])
    return type_prices(values, gang, gpus_per_type)


def fits(cand: Candidate, free: np.ndarray) -> bool:
    """``(cand.alloc <= free).all()`` for a ``free`` without negative cells, through the
    placement's few cells."""
    flat = free.reshape(-1)
    return all(flat[i] >= n for i, n in zip(*cand.cells, strict=True))


def placement_of(cand: Candidate, ctx: RoundContext) -> Placement:
    """A candidate's placement ``{node: {type: count}}`` (as ``placement_from_matrix``, from its cells)."""
    nodes, types, n_types = (
        ctx.cluster.node_names,
        ctx.cluster.gpu_types,
        len(ctx.cluster.gpu_types),
    )
    out: dict[str, dict[str, int]] = {}
    for i, n in zip(*cand.cells, strict=True):
        h, k = divmod(i, n_types)
        out.setdefault(nodes[h], {})[types[k]] = n
    return out


def type_rates_alone(v: JobValuation, capacity: np.ndarray) -> np.ndarray:
    """Per type, the gang's fastest rate on that type alone: consolidated on a node with W of them,
    else across nodes when the type has W in all; 0 when it cannot hold the gang."""
    w = v.request.num_gpus
    cons = np.where(capacity >= w, v.request.rates_cons, 0.0).max(axis=0, initial=0.0)
    unc = np.where(capacity > 0, v.request.rates_unc, 0.0).max(axis=0, initial=0.0)
    unc = np.where(capacity.sum(axis=0) >= w, unc, 0.0)
    return np.where(cons > 0, cons, unc)


def overdue_jobs(
    vals: list[JobValuation], ctx: RoundContext, max_wait_s: float | None
) -> list[int]:
    """Indices of the jobs that have not started and would exceed ``max_wait_s`` of waiting by
    the end of this round, longest-waiting first."""
    if max_wait_s is None:
        return []
    waited = {
        i: ctx.now - v.status.job.arrival
        for i, v in enumerate(vals)
        if v.status.first_start is None
    }
    late = [i for i, w in waited.items() if w + ctx.round_length > max_wait_s]
    return sorted(late, key=lambda i: (-waited[i], i))


def critical_jobs(
    vals: list[JobValuation], ctx: RoundContext, slack_s: float
) -> list[tuple[int, float]]:
    """Jobs on the critical path of the remaining TTD, longest first, with their deadline (seconds
    from now). The remaining TTD is at least ``L = max(longest remaining time on its best
    placement, GPU-seconds of remaining work at best rates / GPUs)``; a job whose own best
    remaining time is within ``slack_s`` of L extends the TTD if it waits, so it must run now at a
    rate that finishes it by L."""
    if not vals:
        return []
    gpus = max(1, ctx.cluster.total_gpus)
    rates: dict[int, float] = {}  # per request object: jobs of one class share theirs
    best = [best_remaining_s(v, ctx, rates) for v in vals]
    work = sum(
        v.status.job.num_gpus * t for v, t in zip(vals, best, strict=True) if math.isfinite(t)
    )
    finite = [t for t in best if math.isfinite(t)]
    if not finite:
        return []
    bound = max(max(finite), work / gpus)
    out = [(i, bound) for i, t in enumerate(best) if math.isfinite(t) and t >= bound - slack_s]
    return sorted(out, key=lambda it: (-best[it[0]], it[0]))


def best_remaining_s(
    v: JobValuation, ctx: RoundContext, memo: dict[int, float] | None = None
) -> float:
    """Seconds the job still needs on the fastest placement the cluster can give its gang
    (``memo``: best rates by ``id(request)``, shared across calls of one round)."""
    rate = None if memo is None else memo.get(id(v.request))
    if rate is None:
        rate = best_achievable_rate(
            v.request.rates_cons, v.request.rates_unc, ctx.cluster.capacity, v.request.num_gpus
        )
        if memo is not None:
            memo[id(v.request)] = rate
    return v.status.remaining_steps / rate if rate > 0 else math.inf


def deadline_candidate(
    entry: QueueEntry,
    v: JobValuation,
    free: np.ndarray,
    cache: CandidateCache,
    deadline_s: float,
    ctx: RoundContext,
    strict: bool = False,
) -> Candidate | None:
    """The best-payoff candidate that finishes the job within ``deadline_s``; if none does, the
    fastest candidate (ties: payoff), or None with ``strict``; None when nothing fits."""
    if int(free.sum()) < entry.request.num_gpus:
        return None
    cands = cache.candidates(entry, free)
    if not cands:
        return None
    rem = v.status.remaining_steps
    penalty = ctx.restart_penalty if v.status.done_steps > 0 else 0.0

    def finish(c: Candidate) -> float:
        return rem / c.rate + (0.0 if c.kept else penalty)

    ok = [c for c in cands if finish(c) <= deadline_s + 1e-6]
    if ok:
        return max(ok, key=entry.payoff)
    return None if strict else max(cands, key=lambda c: (c.rate, entry.payoff(c)))


def job_id_of(key: object) -> int:
    """The job id a Hadar queue entry is keyed by (HadarE keys its copies otherwise)."""
    if not isinstance(key, (int, np.integer)):
        raise TypeError(f"a Hadar queue entry is keyed by its job id, not {key!r}")
    return int(key)


def admit(
    entries: list[QueueEntry],
    free: np.ndarray,
    ctx: RoundContext,
    bounds_cache: CandidateCache,
    config: HadarConfig,
) -> tuple[list[tuple[object, Candidate]], dict[str, object]]:
    """Steps 3-5 of the round: DP window, greedy remainder, backfill. Mutates ``free``."""
    cache = bounds_cache
    key: StateKey = free.tobytes()
    total_free = int(free.sum())
    standalone: list[tuple[float, int]] = []
    for i, e in enumerate(entries):
        best = cache.best(e, free, key) if total_free >= e.request.num_gpus else None
        if best is not None:
            standalone.append((best[1], i))
    min_w = min((entries[i].request.num_gpus for _, i in standalone), default=1)
    k = int(
        np.clip(
            math.ceil(config.window_factor * total_free / min_w),
            config.window_min,
            config.window_max,
        )
    )
    ranked = sorted(standalone, key=lambda t: (-t[0], t[1]))
    window_idx = sorted(i for _, i in ranked[:k])
    result = plan_queue([entries[i] for i in window_idx], free, cache, beam=config.beam)
    placed: list[tuple[object, Candidate]] = []
    taken: set[int] = set()

    def commit(i: int, cand: Candidate) -> None:
        nonlocal key, total_free
        placed.append((entries[i].key, cand))
        taken.add(i)
        cand.take_from(free)
        key = (
            cache.fresh_key()
        )  # a new state: hashing a large cluster's bytes per placement is costly
        total_free -= cand.gpus

    for wi, cand, _ in result.chosen:
        commit(window_idx[wi], cand)
    greedy = 0
    lineage = object()  # from here on ``free`` only loses GPUs
    for _, i in ranked[k:]:
        if total_free >= entries[i].request.num_gpus:
            best = cache.best(entries[i], free, key, lineage)
            if best is not None:
                commit(i, best[0])
                greedy += 1
    backfilled = (
        backfill(
            [entries[i] for i in range(len(entries)) if i not in taken],
            free,
            ctx,
            lambda e, c: placed.append((e.key, c)),
        )
        if config.backfill
        else 0
    )
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


def backfill(
    entries: list[QueueEntry],
    free: np.ndarray,
    ctx: RoundContext,
    commit: Callable[[QueueEntry, Candidate], None],
) -> int:
    """Step 5: offer the GPUs still free, at zero price, to ``entries``, highest utility first.
    Mutates ``free``; returns how many were placed."""
    zero = CandidateCache(ctx.cluster.capacity, None)
    total = int(free.sum())
    key = free.tobytes()

    def best(e: QueueEntry) -> Candidate | None:
        if total < e.request.num_gpus:
            return None
        b = best_candidate(zero.candidates(e, free, key), e.payoff)
        return None if b is None else b[0]

    scored = []
    for i, e in enumerate(entries):
        c = best(e)
        if c is not None:
            scored.append((-e.payoff(c), i))
    done = 0
    for _, i in sorted(scored):
        c = best(entries[i])
        if c is not None:
            commit(entries[i], c)
            free[...] = free - c.alloc
            total -= c.gpus
            key = free.tobytes()
            done += 1
    return done


def at_fastest_rate(rate: float, request: JobRequest, ceilings: dict[int, float]) -> bool:
    """Whether no placement of ``request`` is faster than ``rate`` (then no move can gain: its
    gain is at most minus the restart penalty). ``ceilings`` remembers each request object's
    fastest cell (jobs of a class share their request)."""
    ceiling = ceilings.get(id(request))
    if ceiling is None:
        ceiling = ceilings[id(request)] = max(
            float(request.rates_cons.max(initial=0.0)), float(request.rates_unc.max(initial=0.0))
        )
    return rate >= ceiling


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
    ceilings: dict[int, float] = {}  # per request object: the fastest rate of any of its cells
    for job_id in sorted(running, key=lambda j: (vals[j].status.job.arrival, j)):
        if not free.any():  # no idle GPU to move onto (and none appears without a move)
            break
        v = vals[job_id]
        old_rate = ctx.throughput.rate(v.status.job, running[job_id], ctx.cluster)
        if old_rate <= 0 or at_fastest_rate(old_rate, v.request, ceilings):
            continue
        own = ctx.cluster.placement_matrix(running[job_id])
        pool = free + own
        cands = zero.candidates(
            # jobs of one class share their request object: and so its candidates
            QueueEntry(job_id, v.request, ("upgrade", id(v.request)), lambda r: r, lambda r: 1.0),
            pool,
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
