"""Hadar's preemptive round (``replan=preempt``, the default): every job, running or not, is
re-planned each round, with the TTD guard and the deferral bounds (finish-time fairness
``max_rho``, the wall-clock ``max_wait_s``) placing critical-path and overdue jobs first."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from hadar.policy import Assignment, RoundContext, RoundPlan
from hadar.reference_rates import equal_share_rate
from hadar.running import split_running
from hadar.scheduler.contention import Contention
from hadar.scheduler.endgame import endgame
from hadar.scheduler.matching import candidate_on_type, match_types
from hadar.scheduler.steps import (
    admit,
    backfill,
    fits,
    job_id_of,
    placement_of,
)
from hadar.scheduler.tail import may_displace, tail_jobs
from hadar.scheduler.ttd import (
    CRITICAL_TOLERANCE_ROUNDS,
    best_remaining_s,
    candidate_by_deadline,
    critical_jobs,
    guard_candidate,
    remaining_times,
)
from hadar.valuation import JobValuation
from primal_dual.dp import CandidateCache, QueueEntry
from primal_dual.find_alloc import Candidate

if TYPE_CHECKING:
    from hadar.scheduler import HadarPolicy


def decide(policy: HadarPolicy, ctx: RoundContext) -> RoundPlan:
    """Every job is (re-)planned each round (Algorithm 1 with preemption):

    1. critical-path jobs (the TTD guard) are placed first, on idle GPUs when that meets their
       deadline, then the tail guard's (``tail_percentile``, :mod:`hadar.scheduler.tail`) alike;
       then overdue jobs (the deferral bounds ``max_rho`` and ``max_wait_s``), least
       laxity first, on the best-payoff placement that meets their deadline, else the fastest;
    2. the DP (Algorithm 2) over all other jobs, running ones included, selects which run;
    3. selected running jobs the DP keeps where they are stay on their GPUs (no restart); the
       others take the placement the DP chose for them where it is still free, else the best
       placement left;
    4. GPUs still idle are backfilled at zero price, highest utility first;
    5. type matching (``type_matching``, :mod:`hadar.scheduler.matching`) re-assigns the GPU
       types of the jobs steps 2-4 placed, and of overdue jobs within their deadlines, to
       minimise the sum of projected completion times, no job past its fairness bound;
    6. a kept job moves onto faster idle GPUs only when that finishes it ``upgrade_min_gain_s``
       sooner, restart included.

    In the endgame (every job fits at once and the TTD bound is at most
    ``CONTENDED_HORIZON_ROUNDS`` rounds away, :mod:`hadar.scheduler.endgame`) step 1 places every
    job on the GPU type of the best round-by-round schedule instead, and nothing else moves.
    """
    cfg = policy.config
    running, _ = split_running(ctx)
    held = {j: ctx.cluster.placement_matrix(p) for j, p in running.items()}
    vals, entries, cache = policy.round_problem(ctx, held)
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
        idle: np.ndarray = np.maximum(out, 0)
        return idle

    def guard(i: int, deadline: float, displace: bool = True) -> None:
        """Place a guarded job: on idle GPUs when that meets ``deadline``, else (``displace``) as
        :func:`guard_candidate` chooses among all free GPUs, running jobs' included."""
        cand = guard_candidate(
            entries[i], vals[i], idle_for(entries[i].key), cache, deadline, ctx, strict=True
        )
        if cand is None and displace:
            cand = guard_candidate(entries[i], vals[i], free, cache, deadline, ctx)
        if cand is not None:
            take(i, cand)

    slack_s = (cfg.critical_slack_rounds + CRITICAL_TOLERANCE_ROUNDS) * ctx.round_s
    best_s = remaining_times(vals, ctx)  # what the guards, the bounds and the matching all read
    crit = critical_jobs(vals, ctx, slack_s, cfg.ttd_bound, best_s) if cfg.ttd_guard else []
    # the TTD guard first: these jobs set the TTD (hadar/scheduler/ttd.py); in the endgame every
    # job, on the GPU type of the best round-by-round schedule (hadar/scheduler/endgame.py)
    types = endgame(vals, ctx, held, crit) if cfg.endgame else None
    if types is None:
        for i, deadline in crit:
            guard(i, deadline)
    else:
        critical = dict(crit)
        # jobs staying on their type first (their GPUs are theirs), then the largest gangs
        for i in sorted(
            types, key=lambda i: (not _stays(entries[i], types[i]), -vals[i].request.num_gpus, i)
        ):
            entry = replace(entries[i], move_min_rate=0.0)  # any move the plan makes
            cand = candidate_on_type(entry, vals[i], free, types[i], cache, ctx)
            if cand is not None:
                take(i, cand)
            elif i in critical:  # its type cannot hold its gang now (nodes fragmented)
                guard(i, critical[i])
    if cfg.tail_percentile is not None:  # then the tail guard (hadar/scheduler/tail.py)
        policy.finished.observe(ctx.now, ctx.jobs)
        for i, deadline in tail_jobs(vals, ctx, cfg.tail_percentile, policy.finished.jcts, best_s):
            if entries[i].key not in placed:
                guard(i, deadline, displace=may_displace(entries[i].request.num_gpus))
    # then the deferral bounds: the best-payoff placement (round prices) that meets the job's
    # deadline (its finish-time fairness bound), else the fastest
    if cfg.max_rho is not None:
        policy.contention.observe(ctx.now, [s.job_id for s in ctx.jobs])
    guarded = set(placed)  # the guards' jobs: at their bound, only the soonest finish will do
    deadlines: dict[int, float] = {}  # overdue jobs: any type that meets the deadline will do
    rho = deferred_rho(vals, ctx, policy.contention, best_s) if cfg.max_rho is not None else None
    overdue = overdue_jobs(vals, ctx, cfg.max_wait_s, cfg.max_rho, policy.contention, rho, best_s)
    for i, deadline in overdue:
        if entries[i].key not in placed:
            cand = deadline_candidate(entries[i], vals[i], free, cache, deadline, ctx)
            if cand is not None:
                take(i, cand)
                deadlines[job_id_of(entries[i].key)] = deadline
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
    if cfg.type_matching:  # the GPU types of the jobs chosen by the DP and backfill
        index = {job_id_of(e.key): i for i, e in enumerate(entries)}
        chosen = {j: index[j] for j in placed if j not in guarded}
        bounds = {}  # no job may be moved past its finish-time fairness bound
        if rho is not None and cfg.max_rho is not None:
            bounds = {
                j: cfg.max_rho * rho[i][1] - (ctx.now - vals[i].status.job.arrival)
                for j, i in chosen.items()
            }
        info["type_matched"] = match_types(
            chosen, placed, vals, entries, free, ctx, cache, deadlines, bounds, info, best_s
        )
    # (in the endgame the plan already weighed every move: an upgrade would only undo it)
    kept_jobs = {k: running[k] for k, c in placed.items() if c.kept and types is None}
    moved_to, upgraded = policy.upgrade(kept_jobs, {v.status.job_id: v for v in vals}, free, ctx)
    info.update(
        endgame=types is not None,
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


def _stays(entry: QueueEntry, k: int) -> bool:
    """Whether the job runs now on GPUs of type ``k`` alone (staying there needs no restart)."""
    if entry.keep is None:
        return False
    types = np.flatnonzero(entry.keep.sum(axis=0))
    return len(types) == 1 and int(types[0]) == k


def overdue_jobs(
    vals: list[JobValuation],
    ctx: RoundContext,
    max_wait_s: float | None,
    max_rho: float | None = None,
    contention: Contention | None = None,
    rho: list[tuple[float, float]] | None = None,
    best: Sequence[float] | None = None,
) -> list[tuple[int, float]]:
    """The jobs a deferral bound protects this round, each with the seconds from now by which it
    should finish: those whose finish-time fairness would exceed ``max_rho`` if they waited
    another round (:func:`deferred_rho`; deadline: finishing at ``max_rho``), least laxity first,
    then those not started that would exceed ``max_wait_s`` of waiting by the end of this round
    (longest-waiting first; deadline 0: the fastest placement). ``best``: the jobs'
    :func:`~hadar.scheduler.ttd.remaining_times`, when the caller has them."""
    out: list[tuple[int, float]] = []
    if max_rho is not None:
        rho = deferred_rho(vals, ctx, contention, best) if rho is None else rho
        deadline = {
            i: max_rho * fair - (ctx.now - vals[i].status.job.arrival)
            for i, (r, fair) in enumerate(rho)
            if r > max_rho
        }
        # least laxity first (deadline - best remaining time): the classical order for deadlines
        # (ordering by rho would let any job shorter than a round, whose rho a one-round wait
        # inflates, outrank a long job that has no slack left)
        if best is None:
            rates: dict[int, float] = {}
            laxity = {i: d - best_remaining_s(vals[i], ctx, rates) for i, d in deadline.items()}
        else:
            laxity = {i: d - best[i] for i, d in deadline.items()}
        out = [(i, deadline[i]) for i in sorted(deadline, key=lambda i: (laxity[i], i))]
    if max_wait_s is not None:
        waited = {
            i: ctx.now - v.status.job.arrival
            for i, v in enumerate(vals)
            if v.status.first_start is None
        }
        late = [i for i, w in waited.items() if w + ctx.round_s > max_wait_s]
        chosen = {i for i, _ in out}
        out += [(i, 0.0) for i in sorted(late, key=lambda i: (-waited[i], i)) if i not in chosen]
    return out


def deferred_rho(
    vals: list[JobValuation],
    ctx: RoundContext,
    contention: Contention | None = None,
    best: Sequence[float] | None = None,
) -> list[tuple[float, float]]:
    """Per job, its finish-time fairness if it got no GPUs this round and then ran on its fastest
    placement, ``(now + round - arrival + best remaining time) / (fair-share JCT + round)``, and
    that denominator. The fair share is an equal 1/n share (:func:`fair_share_jct`), n the jobs
    present averaged over the job's life so far (``contention``; the jobs present now without
    it), as the metric averages it over the whole life. *Decision*: the reference JCT includes one round, the wait no round-based
    scheduler can avoid (jobs arrive between rounds): without it every job shorter than a round
    would count as overdue on arrival and outrank all others. ``best``: the jobs'
    :func:`~hadar.scheduler.ttd.remaining_times`, when the caller has them."""
    if not vals:
        return []
    cap, gpus, n = ctx.cluster.capacity, ctx.cluster.total_gpus, len(ctx.jobs)
    best = remaining_times(vals, ctx) if best is None else best
    equal: dict[int, float] = {}  # per request object (jobs of a class share it)
    rates = []
    for v in vals:
        rate = equal.get(id(v.request))
        if rate is None:
            rate = equal[id(v.request)] = equal_share_rate(v.request.rates_cons, cap)
        rates.append(rate)
    jobs = [v.status.job for v in vals]
    shared = [n] * len(jobs) if contention is None else [contention.average(j.job_id) for j in jobs]
    fair = fair_share_jcts(
        np.array([j.total_steps for j in jobs], dtype=float),
        np.array(rates, dtype=float),
        np.array([j.num_gpus for j in jobs], dtype=float),
        gpus,
        np.array(shared, dtype=float),
    )
    fair += ctx.round_s
    finish = (ctx.now + ctx.round_s) - np.array([j.arrival for j in jobs], dtype=float)
    finish += np.array(best, dtype=float)
    finite = np.isfinite(fair)
    with np.errstate(invalid="ignore"):
        rho = np.where(finite, finish / np.where(finite, fair, 1.0), 0.0)
    return list(zip(rho.tolist(), fair.tolist(), strict=True))


def fair_share_jcts(
    total_steps: np.ndarray,
    equal_rate: np.ndarray,
    num_gpus: np.ndarray,
    total_gpus: int,
    contention: np.ndarray,
) -> np.ndarray:
    """:func:`~hadar.reference_rates.fair_share_jct` of many jobs at once (one value per job in
    each array): the same operations element by element, so the same floats."""
    if total_gpus <= 0:
        return np.full(len(total_steps), math.inf)
    runs = equal_rate > 0
    share = np.minimum(1.0, total_gpus / (np.maximum(1.0, contention) * num_gpus))
    with np.errstate(divide="ignore", invalid="ignore"):
        jct = total_steps / (equal_rate * share)
    out: np.ndarray = np.where(runs, jct, math.inf)
    return out


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
    return candidate_by_deadline(entry, v, free, cache, deadline_s, ctx, strict, soonest=False)
