"""Hadar's endgame (docs/hadar.md, "TTD guard"): the last rounds, once every job present fits in
the cluster at once and the TTD guard's bound on the remaining TTD is at most
``CONTENDED_HORIZON_ROUNDS`` rounds away.

The guard's bound is fluid (jobs share every GPU type in any proportion, at any instant); the
guard places its jobs longest first, each on the best placement that meets that bound, else on
the one that finishes it soonest as if it kept its fastest GPUs afterwards, and the utility
places the others. Rounds are not fluid: a job holds one placement for a whole round, pays a
checkpoint-restart whenever it changes placement, and a GPU whose job finishes mid-round idles
until the round ends. Within a few rounds these decide the TTD. Lab M-2: both jobs want the one
RTX 3090 and neither can finish within a round; the Transformer, the longest, took it first, left
it for the MM job in the second round and came back for the third (two restarts, the 3090 idle
for 144 s of the second round); starting the MM job there instead needs one restart and finishes
5 s sooner. Lab M-7: of two jobs parked on a T4 and an RTX A2000 for a round, which sits where
decides which is left the longest for the last round (22 s).

So in the endgame every job runs on the GPU type of the exact round-by-round schedule: a
branch-and-bound search over each round's assignment of the jobs to GPU types (per type, their
gangs within its GPUs; a job runs at its fastest rate on that type alone, at its present
placement's rate and without restart where it stays), with restarts and mid-round finishes counted
as the simulator counts them, minimising the TTD, then the sum of the completion times (the
average JCT). Arrivals are not foreseen: the plan is made again every round. Once entered, the
endgame lasts while no job arrives (jobs only leave and the bound only falls), so each round
continues the plan of the last. When the search needs more than ``MAX_LEAVES`` round assignments
(many jobs, many types), more than ``MAX_ROUNDS`` rounds or more than ``MAX_JOBS`` jobs, the
guard's and the utility's placements stand.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence

import numpy as np

from hadar.policy import RoundContext, remember_per_run
from hadar.reference_rates import best_rate_per_type
from hadar.scheduler.ttd import CONTENDED_HORIZON_ROUNDS
from hadar.valuation import JobValuation

MAX_LEAVES = 10_000
"""Round assignments the search may evaluate (0.3-0.9 s) before it gives up and the round is
planned as outside the endgame: a computation budget, not a tuning constant. On the physical
mixes (at most five jobs on five GPUs) 4 searches of 70 exceeded it when it was measured, each
the endgame's first round with four or five jobs; a budget of 3,000 changes AWS M-6 (2,391 s ->
2,409 s), so some searches use most of it. The endgame costs the 24 mixes' simulations about
2 s of CPU in all (3.6 s against 1.6 s without it). On ``philly-480`` (seeds 0-4) the endgame has
at most four jobs and its searches at most four round assignments."""

MAX_ROUNDS = int(4 * CONTENDED_HORIZON_ROUNDS)
"""Rounds a schedule may take before the search gives up. The endgame is entered when the fluid
bound is at most ``CONTENDED_HORIZON_ROUNDS`` rounds away; a schedule four times as long means the
rates behind that bound were far off (a real run's measured rate can be a fraction of the
estimate), and the premise, the last few rounds, does not hold. On the physical mixes the
deepest search reached 6 rounds, on ``philly-480`` (seeds 0-4, Hadar and HadarE) 4."""

MAX_JOBS = 32
"""Jobs the search takes on. It recurses once per job per round, so ``MAX_ROUNDS`` rounds of
``MAX_JOBS`` jobs stay near 550 frames, well inside Python's default recursion limit of 1,000
(a real run's coordinator sits some 40 frames deep). The physical mixes enter the endgame with at
most five jobs, ``philly-480`` with at most three."""

PLAN_CACHE_SIZE = 1024
"""Searches remembered (their arguments and plans, a few hundred bytes each)."""

_EPS = 1e-6  # seconds: completion times closer than this are equal


JobState = tuple[int, float, int, bool]
"""A job in the search: its index, remaining steps, current type (-1: none), started."""
Option = tuple[int, float, float, JobState | None]
"""A job's type this round: (type, its finish bound, seconds it needs there, its state next round
or None if it finishes this round)."""


class _OutOfBudget(Exception):
    """The search evaluated more than its ``max_leaves`` round assignments."""


def plan_rounds(
    rates: np.ndarray,
    gangs: Sequence[int],
    counts: Sequence[int],
    remaining: Sequence[float],
    current: Sequence[int],
    started: Sequence[bool],
    round_s: float,
    penalty_s: float | Sequence[float],
    max_leaves: int = MAX_LEAVES,
) -> tuple[list[int], float, float] | None:
    """The GPU type of each job this round in the round-by-round schedule that minimises the
    largest completion time, then their sum (module docstring), with those two in seconds from
    now; -1 for a job no type has room for this round (it waits). ``rates[j, k]``: job j's rate on
    type k alone (0: it cannot run there); ``counts[k]``: type k's GPUs; ``current[j]``: the type
    it runs on now (-1: none), where it stays without restart; a job that has ``started`` pays
    ``penalty_s`` (one for all jobs, or one per job) whenever it runs elsewhere. None when the search needs more than
    ``max_leaves`` round assignments or ``MAX_ROUNDS`` rounds, when there are more than
    ``MAX_JOBS`` jobs, or when no schedule finishes every job."""
    if len(remaining) > MAX_JOBS:
        return None
    penalty = (
        (float(penalty_s),) * len(remaining)
        if isinstance(penalty_s, (int, float))
        else tuple(float(p) for p in penalty_s)
    )
    plan = _plan_rounds(
        tuple(tuple(float(x) for x in row) for row in np.asarray(rates, dtype=float)),
        tuple(int(g) for g in gangs),
        tuple(int(c) for c in counts),
        tuple(float(r) for r in remaining),
        tuple(int(c) for c in current),
        tuple(bool(b) for b in started),
        float(round_s),
        penalty,
        int(max_leaves),
    )
    return None if plan is None else (list(plan[0]), plan[1], plan[2])


@functools.lru_cache(maxsize=PLAN_CACHE_SIZE)
def _plan_rounds(
    rate: tuple[tuple[float, ...], ...],
    gangs: tuple[int, ...],
    counts: tuple[int, ...],
    remaining: tuple[float, ...],
    current: tuple[int, ...],
    started: tuple[bool, ...],
    round_s: float,
    penalty: tuple[float, ...],
    max_leaves: int,
) -> tuple[tuple[int, ...], float, float] | None:
    """:func:`plan_rounds` on hashable arguments, remembered within a run (HadarE's rollouts ask
    the same searches again; the result depends on the arguments alone).

    The search runs hundreds of thousands of times per simulation, so its helpers are written
    out where they are used (a job's soonest finish, a restart, "better than the best so far"):
    the same arithmetic in the same order as the helpers', so the same plans. A job's bound and
    options in a round depend on its own state alone and are worked out once per state, and the
    recursive closures are released when done: their reference cycles would otherwise be left to
    the cyclic collector, which :func:`hadar.core.collector.cyclic_gc_paused` holds off during a
    decision (one HadarE simulation made millions of them)."""
    n_types = len(counts)
    inf = math.inf
    best_largest = inf  # the best schedule found so far: its largest and summed completion,
    best_total = inf  # and its first round
    best_first: dict[int, int] | None = None
    leaves = 0
    horizon = MAX_ROUNDS * round_s - _EPS
    # per round start: each job state's bound and options (below), which depend on the state
    # alone; one job's state recurs across the other jobs' choices, so each is worked out once
    memo_at: dict[float, tuple[dict[JobState, float], dict[JobState, list[Option]]]] = {}

    # per job, its fastest rate on any type and on any type but each one (0.0: none); division
    # and addition are monotone, so the soonest finish comes from these without a scan of types
    fastest = [max((r for r in row if r > 0), default=0.0) for row in rate]
    fastest_but = [
        [
            max((r for k2, r in enumerate(row) if r > 0 and k2 != k), default=0.0)
            for k in range(n_types)
        ]
        for row in rate
    ]
    usable = [[k for k in range(n_types) if row[k] > 0] for row in rate]  # per job, in type order

    def soonest(j: int, rem: float, cur: int, began: bool) -> float:
        """Seconds job j needs at least: alone, on its best type (where it runs now without
        restart, elsewhere with one if it has ``began``)."""
        if not began:
            return rem / fastest[j] if fastest[j] > 0 else inf
        if cur < 0:
            return penalty[j] + rem / fastest[j] if fastest[j] > 0 else inf
        other = fastest_but[j][cur]
        away = penalty[j] + rem / other if other > 0 else inf
        here = rate[j][cur]
        if here > 0:
            near = rem / here
            return away if away < near else near  # min(near, away)
        return away

    def options(
        state: JobState, t: float, options_of: dict[JobState, list[Option]]
    ) -> list[Option]:
        """A job's options in the round from ``t``, fastest first (``tau``, then type), which
        it also enters in ``options_of``: (type, finish bound, tau, its state next round or None
        if it finishes this round)."""
        j, rem, cur, began = state
        row = rate[j]
        pen_j = penalty[j] if began else 0.0
        t_next = t + round_s
        out: list[Option] = []
        for tau, k in sorted(((pen_j if k != cur else 0.0) + rem / row[k], k) for k in usable[j]):
            if tau <= round_s:
                out.append((k, t + tau, tau, None))
            else:
                run = round_s - (pen_j if k != cur else 0.0)
                done = row[k] * (run if run > 0.0 else 0.0)
                rest = rem - done
                out.append(
                    (k, t_next + soonest(j, rest, k, True), tau, (j, rest, k, began or done > 0))
                )
        options_of[state] = out
        return out

    def search(
        t: float,
        jobs: list[JobState],
        f: float,
        s: float,
        first: dict[int, int] | None,
    ) -> None:
        """Rounds from ``t`` on for the unfinished ``jobs`` (index, remaining steps, current
        type, started); ``f``, ``s``: the largest and summed completion of the finished ones."""
        nonlocal best_largest, best_total, best_first
        if not jobs:
            if f < best_largest - _EPS or (f <= best_largest + _EPS and s < best_total - _EPS):
                best_largest, best_total, best_first = f, s, first
            return
        if t >= horizon:
            raise _OutOfBudget
        # each job's soonest finish, in the order of ``jobs``; the largest and the sum
        memo = memo_at.get(t)
        if memo is None:
            memo = memo_at[t] = ({}, {})
        bound_of, options_of = memo
        keyed = []
        bounds = []
        f0 = f
        for state in jobs:
            b = bound_of.get(state)
            if b is None:
                j, rem, cur, began = state
                b = bound_of[state] = t + soonest(j, rem, cur, began)
            keyed.append((-b, state[0], state, b))
            bounds.append(b)
            if b > f0:  # max(f, *bounds)
                f0 = b
        s0 = s + sum(bounds)
        if not (f0 < best_largest - _EPS or (f0 <= best_largest + _EPS and s0 < best_total - _EPS)):
            return
        keyed.sort()  # longest bound first, then by index (indices are unique)
        t_next = t + round_s
        order = [(state, b) for _, _, state, b in keyed]

        n = len(order)
        free = list(counts)
        chosen: dict[int, int] = {}
        left: list[JobState] = []  # the jobs not finished, in ``order``

        def assign(pos: int, f_part: float, s_part: float, f2: float, s2: float) -> None:
            """Assign ``order[pos:]`` a type; ``f_part``, ``s_part``: lower bounds on the
            largest and summed completion given the types ``order[:pos]`` have; ``f2``, ``s2``:
            the largest and summed completion of the jobs finished so far (``order[:pos]``'s
            that finish this round included, summed in that order)."""
            nonlocal leaves
            if pos == n:
                leaves += 1
                if leaves > max_leaves:
                    raise _OutOfBudget
                search(t_next, list(left), f2, s2, dict(chosen) if first is None else first)
                return
            job, bound = order[pos]
            j = job[0]
            need = gangs[j]
            room = False
            opts = options_of.get(job)
            for k, finish, tau, state in opts if opts is not None else options(job, t, options_of):
                if free[k] < need:
                    continue
                room = True
                f3 = finish if finish > f_part else f_part
                s3 = s_part + finish - bound
                if not (
                    f3 < best_largest - _EPS
                    or (f3 <= best_largest + _EPS and s3 < best_total - _EPS)
                ):
                    continue
                free[k] -= need
                chosen[j] = k
                if state is None:  # it finishes this round, at ``finish``
                    assign(pos + 1, f3, s3, finish if finish > f2 else f2, s2 + t + tau)
                else:
                    left.append(state)
                    assign(pos + 1, f3, s3, f2, s2)
                    left.pop()
                free[k] += need
            if not room:  # no type has room for its gang: it waits
                chosen[j] = -1
                _, rem, _, began = job
                finish = t_next + soonest(j, rem, -1, began)
                left.append((j, rem, -1, began))
                assign(
                    pos + 1,
                    finish if finish > f_part else f_part,
                    s_part + finish - bound,
                    f2,
                    s2,
                )
                left.pop()

        try:
            assign(0, f0, s0, f, s)
        finally:
            # it refers to itself: a reference cycle the collector would have to find
            assign = None  # type: ignore[assignment]

    jobs = [
        (j, float(r), int(c), bool(b))
        for j, (r, c, b) in enumerate(zip(remaining, current, started, strict=True))
    ]
    try:
        search(0.0, jobs, 0.0, 0.0, None)
    except _OutOfBudget:
        return None
    finally:
        # it refers to itself (and so to the memo): freed now, not by the collector
        search = None  # type: ignore[assignment]
    if best_first is None:
        return None
    return tuple(best_first[j] for j in range(len(jobs))), best_largest, best_total


remember_per_run(_plan_rounds.cache_clear)


def endgame(
    vals: list[JobValuation],
    ctx: RoundContext,
    held: Mapping[int, np.ndarray],
    critical: Sequence[tuple[int, float]],
    max_leaves: int = MAX_LEAVES,
) -> dict[int, int] | None:
    """In the endgame (module docstring: the TTD guard's ``critical`` jobs, index and deadline,
    have a bound at most ``CONTENDED_HORIZON_ROUNDS`` rounds away and every job's gang fits at
    once), the GPU type of every job (index into ``vals``) this round (:func:`plan_rounds`);
    ``held``: the running jobs' placements (job id -> ``[node, type]`` matrix). None outside it,
    when the search gives up, or when some job can run nowhere or must wait this round."""
    if not critical or max(d for _, d in critical) > CONTENDED_HORIZON_ROUNDS * ctx.round_s:
        return None
    if len(vals) > MAX_JOBS or sum(v.request.num_gpus for v in vals) > ctx.cluster.total_gpus:
        return None  # (more jobs than the search takes on: no rates to gather)
    cap = ctx.cluster.capacity
    rows, current, started = [], [], []
    per_class: dict[int, np.ndarray] = {}  # jobs of one class share their request object
    for v in vals:
        r = v.request
        if id(r) not in per_class:
            per_class[id(r)] = best_rate_per_type(r.rates_cons, r.rates_unc, cap, r.num_gpus)
        row = per_class[id(r)].astype(float)  # a copy: the present placement's rate goes in
        cur = -1
        own = held.get(v.status.job_id)
        if own is not None:
            types = np.flatnonzero(own.sum(axis=0))
            if len(types) == 1:
                cur = int(types[0])
                placement = ctx.cluster.placement_from_matrix(own)
                row[cur] = ctx.throughput.rate(v.status.job, placement, ctx.cluster)
        if not (row > 0).any():
            return None
        rows.append(row)
        current.append(cur)
        started.append(v.status.done_steps > 0)
    plan = plan_rounds(
        np.array(rows).reshape(len(vals), cap.shape[1]),
        [v.request.num_gpus for v in vals],
        [int(c) for c in cap.sum(axis=0)],
        [v.status.remaining_steps for v in vals],
        current,
        started,
        ctx.round_s,
        [v.status.job.restart_cost_s(ctx.restart_penalty_s) for v in vals],
        max_leaves,
    )
    if plan is None or min(plan[0]) < 0:
        return None
    return dict(enumerate(plan[0]))
