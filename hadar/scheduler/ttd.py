"""Hadar's TTD guard (docs/hadar.md, "TTD guard"): which jobs are on the critical path of the
remaining TTD, the deadline each must meet, and the placement such a job takes.

The remaining TTD is at least ``L = max(longest remaining time on a job's best placement,
GPU-seconds of remaining work at best rates / GPUs)``; a job whose own best remaining time is
within the slack of L would extend the TTD if it waited (``ttd_bound = longest``). L ignores that
jobs contend for the same fast GPUs: on the lab cluster every job's fastest GPU is the one RTX
3090, and the second-longest job, though below L, can still set the TTD once it loses the 3090.
Once every job present can run at once (their gangs fit in the cluster, so no job waits for
admission and the only question is which GPUs each gets), ``ttd_bound = makespan-lp`` (the
default) takes the bound from the fluid minimum makespan over GPU types (Gavel's makespan LP,
:mod:`primal_dual.level_lp`); when every one of those jobs is needed to reach it (without the
shortest the makespan would be lower), all of them are critical, with that bound as deadline,
and the longest take the fastest GPUs first, while that bound is at most
``CONTENDED_HORIZON_ROUNDS`` rounds away. While jobs queue, while a smaller group sets the bound
or while it is further away, only the longest-path jobs are protected and the utility serves the rest (see
:func:`contended_critical` for what protecting a group among others cost).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from hadar.policy import RoundContext, remember_per_run
from hadar.reference_rates import best_achievable_rate, best_rate_per_type
from hadar.valuation import JobValuation
from primal_dual.dp import CandidateCache, QueueEntry
from primal_dual.find_alloc import Candidate
from primal_dual.level_lp import min_makespan

CRITICAL_TOLERANCE_ROUNDS = 0.01
"""Jobs within 1 % of a round of the TTD bound count as on the critical path (rate estimates are
continuous, so "exactly on the bound" needs a tolerance)."""


CONTENDED_HORIZON_ROUNDS = 4.0
"""The contended bound protects the whole group only while it is at most this many rounds: then a
job parked on a slow GPU for one round loses a share of the time left that no later round wins
back (lab M-4: jobs of 1-2 rounds at best). Over a longer horizon the longest-path rule and later
moves keep the TTD near the bound, and the utility lets the group's shorter jobs finish early:
protecting the group there evened out the last jobs' finishes (independent A100/T4/RTX cluster,
philly-160: TTD 11.11 h -> 11.00 h, p99 JCT 10.57 h -> 10.90 h, behind Gavel's 10.79 h). 3
rounds lost lab M-5 (0.99x Gavel's TTD); 4 and 6 gave the same mixes."""


def critical_jobs(
    vals: list[JobValuation],
    ctx: RoundContext,
    slack_s: float,
    bound: str = "longest",
    best: Sequence[float] | None = None,
) -> list[tuple[int, float]]:
    """Jobs on the critical path of the remaining TTD, longest first, with their deadline
    (seconds from now): those whose best remaining time is within ``slack_s`` of the bound L (see
    the module docstring), or with ``bound = makespan-lp``, once every job's gang fits in the
    cluster at once, every job when all of them set the fluid makespan (:func:`contended_critical`).
    ``best``: the jobs' :func:`remaining_times`, when the caller has them."""
    if not vals:
        return []
    gpus = max(1, ctx.cluster.total_gpus)
    best = remaining_times(vals, ctx) if best is None else best
    work = sum(
        v.status.job.num_gpus * t for v, t in zip(vals, best, strict=True) if math.isfinite(t)
    )
    finite = [t for t in best if math.isfinite(t)]
    if not finite:
        return []
    limit = max(max(finite), work / gpus)
    out = [(i, limit) for i, t in enumerate(best) if math.isfinite(t) and t >= limit - slack_s]
    if bound == "makespan-lp" and sum(v.request.num_gpus for v in vals) <= ctx.cluster.total_gpus:
        out = contended_critical(vals, ctx, best, limit, slack_s, out)
    return sorted(out, key=lambda it: (-best[it[0]], it[0]))


def contended_critical(
    vals: list[JobValuation],
    ctx: RoundContext,
    best: Sequence[float],
    limit: float,
    slack_s: float,
    longest: list[tuple[int, float]],
) -> list[tuple[int, float]]:
    """Every job, with the contended bound ``max(limit, fluid makespan of all jobs)`` as deadline,
    when the group of all jobs is what sets it: without the shortest job (best remaining time,
    ties by position) the fluid makespan (:func:`prefix_makespan`) falls more than ``slack_s``
    below it, so no job may wait. Else, or when that bound is more than
    ``CONTENDED_HORIZON_ROUNDS`` rounds away, ``longest`` (the jobs within ``slack_s`` of
    ``limit``).
    *Decision*: only the whole group. Protecting a longest-first prefix of the jobs while others
    remain (the smallest prefix whose makespan reaches the bound, the level algorithm's critical
    group) also shortened ``philly-480``'s TTD (seed 3: 25.20 h -> 23.48 h), but the jobs
    outside the prefix then waited for the fast GPUs: p99 JCT 18.49 h -> 19.07 h (seed 1:
    22.92 h -> 23.37 h), and on the independent A100/T4/RTX cluster Hadar's p99 fell behind
    Gavel's."""
    horizon_s = CONTENDED_HORIZON_ROUNDS * ctx.round_s
    if limit > horizon_s:  # the bound, at least ``limit``, is too far away whatever the LP says
        return longest
    order = [i for i in sorted(range(len(vals)), key=lambda i: (-best[i], i)) if best[i] < math.inf]
    cap = ctx.cluster.capacity
    per_class: dict[int, np.ndarray] = {}
    for i in order:
        r = vals[i].request
        if id(r) not in per_class:
            per_class[id(r)] = best_rate_per_type(r.rates_cons, r.rates_unc, cap, r.num_gpus)
    table = np.array([per_class[id(vals[i].request)] for i in order]).reshape(len(order), -1)
    gangs = np.array([vals[i].request.num_gpus for i in order], dtype=float)
    remaining = np.array([vals[i].status.remaining_steps for i in order])
    counts = cap.sum(axis=0)
    n = len(order)
    whole = prefix_makespan(table, gangs, counts, remaining)
    bound = max(limit, whole)
    if whole < bound - slack_s or bound > horizon_s:
        return longest
    if n > 1:
        without_shortest = prefix_makespan(table[:-1], gangs[:-1], counts, remaining[:-1])
        if without_shortest >= bound - slack_s:
            return longest
    return [(i, bound) for i in sorted(order)]


MAKESPAN_MEMO_SIZE = 4096
"""Makespan LPs remembered within a run (a key and a float each): HadarE's rollouts replay Hadar
from the same states, and 58 % of their LPs repeat one already solved (aws and lab M-5 and M-10
at 90 s rounds)."""

_makespans: dict[tuple[object, ...], float] = {}
remember_per_run(_makespans.clear)


def prefix_makespan(
    rates: np.ndarray, gangs: np.ndarray, counts: np.ndarray, remaining: np.ndarray
) -> float:
    """Seconds the fluid schedule needs to finish ``remaining`` steps of each job on GPU types
    with ``counts`` GPUs (``rates[job, type]`` the gang's rate on that type alone): Gavel's
    makespan LP; infinite when some job can run nowhere. Remembered by its arguments within a
    run (the LP's answer depends on them alone)."""
    arrays = [np.asarray(a) for a in (rates, gangs, counts, remaining)]
    key = tuple(x for a in arrays for x in (a.shape, a.dtype.str, a.tobytes()))
    seconds = _makespans.get(key)
    if seconds is None:
        level = min_makespan(rates, gangs, counts, remaining).level
        seconds = 1.0 / level if level > 0 else math.inf
        if len(_makespans) >= MAKESPAN_MEMO_SIZE:
            _makespans.clear()
        _makespans[key] = seconds
    return seconds


def remaining_times(vals: Sequence[JobValuation], ctx: RoundContext) -> list[float]:
    """:func:`best_remaining_s` of every job, each request object's best rate computed once: the
    figure the guards, the deferral bounds and the type matching of one round all read."""
    rates: dict[int, float] = {}
    return [best_remaining_s(v, ctx, rates) for v in vals]


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


def guard_candidate(
    entry: QueueEntry,
    v: JobValuation,
    free: np.ndarray,
    cache: CandidateCache,
    deadline_s: float,
    ctx: RoundContext,
    strict: bool = False,
) -> Candidate | None:
    """Where a critical job goes: the best-payoff candidate that finishes it within
    ``deadline_s``; if none does, the one that finishes it soonest, restart included (ties:
    payoff), or None with ``strict``; None when nothing fits. Every move that finishes the job
    sooner is a candidate, however small the gain (no ``upgrade_min_gain_s``): on the critical
    path a second sooner is a second off the TTD (lab M-2: the last job stayed on a Titan RTX for
    103 s rather than restart on the idle RTX 3090 for 56 s)."""
    entry = replace(entry, move_min_rate=0.0)
    return candidate_by_deadline(entry, v, free, cache, deadline_s, ctx, strict, soonest=True)


def candidate_by_deadline(
    entry: QueueEntry,
    v: JobValuation,
    free: np.ndarray,
    cache: CandidateCache,
    deadline_s: float,
    ctx: RoundContext,
    strict: bool,
    soonest: bool,
) -> Candidate | None:
    """The best-payoff candidate that finishes the job within ``deadline_s`` (restart
    included); if none does, None with ``strict``, else the one finishing soonest (``soonest``)
    or the fastest (ties: payoff); None when nothing fits."""
    if int(free.sum()) < entry.request.num_gpus:
        return None
    cands = cache.candidates(entry, free)
    if not cands:
        return None
    rem = v.status.remaining_steps
    penalty = v.status.job.restart_cost_s(ctx.restart_penalty_s) if v.status.done_steps > 0 else 0.0

    def finish(c: Candidate) -> float:
        return rem / c.rate + (0.0 if c.kept else penalty)

    ok = [c for c in cands if finish(c) <= deadline_s + 1e-6]
    if ok:
        return max(ok, key=entry.payoff)
    if strict:
        return None
    if soonest:
        return min(cands, key=lambda c: (finish(c), -entry.payoff(c)))
    return max(cands, key=lambda c: (c.rate, entry.payoff(c)))
