"""Hadar's type matching (``type_matching``; docs/hadar.md, "Type matching"): once the round's
jobs are chosen, which GPU type each of them runs on.

The DP chooses *which* jobs run by the utility (inverse remaining time: shortest remaining first,
the order that empties the queue fastest). Its payoffs also choose the *type*, and there that
utility misleads: ``U = 3600 / tau`` values a faster type by how much sooner it finishes the job
*relative to its remaining time*, so every fast GPU goes to a short job, and a long job whose
speed-up on fast GPUs is the largest (a Transformer is 5.6x faster on a V100 than on a K80) runs
on the slowest type for hours. A round on a slow type is not only the job's loss: the work it
leaves undone must be done later, and it sets the tail (issue 27: the jobs that set `philly-480`'s
p99 JCT spent a third of their time on K80s).

The matching re-assigns the GPU types of the jobs the DP chose (the TTD guard's, the tail guard's
and overdue jobs keep the placements their deadlines chose) to minimise the sum of their projected
completion times after this round: a job on type k finishes within the round at ``tau_k``
(restart included), else at ``round + (remaining - progress_k) / best rate`` (it runs on its
fastest placement afterwards). So a job that does not finish this round is worth
``round x rate_k / best rate`` on type k, its normalised speed (the quantity Gavel's
heterogeneity-aware policies maximise) whatever its length, and a job that finishes is worth the
seconds a faster type saves it. Per type, the jobs' GPUs may not exceed what they hold plus the
idle GPUs. It is a small integer program (jobs of one class in the same situation are one integer
variable), solved with HiGHS; the DP's plan is one of its solutions, so it is always feasible.
The jobs that change type are then placed, largest gang first, on the fastest placement of their
type (the running placement when it is there: no restart); a job whose type cannot hold its gang
any more (nodes fragmented) keeps its planned placement where still free, else takes the best
left.

Ties (e.g. GPU types that are equally fast for every job) keep the DP's plan: leaving the planned
type costs a millionth of a round.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from hadar.policy import RoundContext
from hadar.reference_rates import best_rate_per_type
from hadar.scheduler.steps import fits
from hadar.scheduler.ttd import best_remaining_s
from hadar.valuation import JobValuation
from primal_dual.column_matrix import ColumnMatrix
from primal_dual.dp import CandidateCache, QueueEntry, StateKey
from primal_dual.find_alloc import Candidate
from primal_dual.mip import solve_mip

TIE_BREAK_ROUNDS = 1e-6
"""Cost of leaving the DP's planned type, in rounds: assignments of equal cost keep the plan."""

FINISHING_GRAIN_ROUNDS = 1e-3
"""Jobs that may finish within the round are alike when their best remaining times fall in the
same slice of this many rounds (0.36 s of a 360 s round): their costs then differ by at most that
over the type's relative speed, and a round of 100,000 jobs has a few hundred such groups, not
tens of thousands."""

SOLVER_TIME_LIMIT_S = 5.0
"""HiGHS's limit on the matching's integer program; without a solution by then, or with one that
costs more than the plan, the plan stands (the round's ``info`` says the limit was hit)."""


@dataclass(frozen=True)
class Group:
    """Jobs the matching treats alike: one class, planned type, rate and restart status, none
    finishing within the round (a job that does is a group of its own)."""

    members: tuple[int, ...]
    """Job ids, ascending."""
    gang: int
    planned: int
    """The GPU type the DP planned for them."""
    cost: np.ndarray
    """Per GPU type, one member's projected completion in seconds from now (inf: cannot run there)."""


def single_type(cand: Candidate, n_types: int) -> int | None:
    """The one GPU type a placement uses (of ``n_types``), or None when it spans several. Reads
    only the placement's cells: a large cluster's candidates build no dense matrix."""
    cells = cand.cells[0]
    if len(cells) == 1:  # most placements are one cell (every single-GPU one)
        return int(cells[0]) % n_types
    types = {i % n_types for i in cells}
    return types.pop() if len(types) == 1 else None


def gpus_per_type(cands: Iterable[Candidate], n_types: int) -> np.ndarray:
    """GPUs the placements hold, per type (from their cells)."""
    out = np.zeros(n_types, dtype=np.int64)
    for cand in cands:
        for i, n in zip(*cand.cells, strict=True):
            out[i % n_types] += n
    return out


def give_back(cand: Candidate, free: np.ndarray) -> None:
    """``free += cand.alloc``, through the placement's cells where ``free`` allows a flat view."""
    if not free.flags.c_contiguous:
        free += cand.alloc
        return
    flat = free.reshape(-1)
    for i, n in zip(*cand.cells, strict=True):
        flat[i] += n


def projected_completion(
    type_rates: np.ndarray,
    planned: int,
    planned_rate: float,
    planned_restart: bool,
    started: bool,
    remaining: float,
    best_rate: float,
    round_s: float,
    restart_s: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Per GPU type, the seconds from now at which the job would finish if it ran this round on
    that type (``type_rates``: its fastest rate there; on the ``planned`` type the planned
    placement's rate and restart) and then on its fastest placement (``best_rate``), and the
    seconds it would take if it stayed on that type; inf where it cannot run."""
    cost, stay = projected_completions(
        np.asarray(type_rates, dtype=float)[None, :],
        np.array([planned]),
        np.array([planned_rate], dtype=float),
        np.array([planned_restart]),
        np.array([started]),
        np.array([remaining], dtype=float),
        np.array([best_rate], dtype=float),
        round_s,
        np.array([restart_s], dtype=float),
    )
    return cost[0], stay[0]


def projected_completions(
    type_rates: np.ndarray,
    planned: np.ndarray,
    planned_rate: np.ndarray,
    planned_restart: np.ndarray,
    started: np.ndarray,
    remaining: np.ndarray,
    best_rate: np.ndarray,
    round_s: float,
    restart_s: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`projected_completion` of many jobs at once: ``type_rates[job, type]``, the other
    arguments one value per job (``round_s`` shared). The same operations element by element,
    so the same floats; returns ``(cost, stay)``, each ``[job, type]``."""
    n = type_rates.shape[0]
    rows = np.arange(n)
    rates = type_rates.astype(float)  # a copy
    rates[rows, planned] = planned_rate
    restart = np.repeat(np.where(started, restart_s, 0.0)[:, None], rates.shape[1], axis=1)
    restart[rows, planned] = np.where(planned_restart, restart_s, 0.0)
    ok = rates > 0
    # a job with no positive best rate, or no type it can run on, costs inf everywhere
    ok &= ((best_rate > 0) & ok.any(axis=1))[:, None]
    rem = remaining[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        stay = np.where(ok, restart + rem / rates, math.inf)
        progress = rates * np.maximum(0.0, round_s - restart)
        later = round_s + np.maximum(0.0, rem - progress) / best_rate[:, None]
    cost = np.where(ok, np.where(stay <= round_s, stay, later), math.inf)
    cost += TIE_BREAK_ROUNDS * round_s
    cost[rows, planned] -= TIE_BREAK_ROUNDS * round_s
    return cost, stay


def match_types(
    chosen: Mapping[int, int],
    placed: dict[int, Candidate],
    vals: list[JobValuation],
    entries: list[QueueEntry],
    free: np.ndarray,
    ctx: RoundContext,
    cache: CandidateCache,
    deadlines: Mapping[int, float] | None = None,
    bounds: Mapping[int, float] | None = None,
    report: dict[str, object] | None = None,
    best_s: Sequence[float] | None = None,
) -> int:
    """Re-assign the GPU types of the jobs ``chosen`` (job id -> index into ``vals`` and
    ``entries``) among the GPUs they hold in ``placed`` and the ``free`` ones (module
    docstring). Mutates ``placed`` and ``free``; returns how many jobs changed type. When the
    solver hits its time limit, ``report["time_limit_hit"]`` is set. ``best_s``: the jobs'
    :func:`~hadar.scheduler.ttd.remaining_times` (indexed as ``vals``), when the caller has them."""
    n_types = free.shape[1]
    types = {j: single_type(placed[j], n_types) for j in chosen}
    movable = {
        j: i
        for j, i in chosen.items()
        if types[j] is not None and vals[i].status.remaining_steps > 0
    }
    if len(movable) < 2:
        return 0
    groups = job_groups(movable, placed, vals, ctx, deadlines or {}, bounds or {}, best_s)
    pool = free.sum(axis=0) + gpus_per_type((placed[j] for j in movable), n_types)
    counts, timed_out = assign_types(groups, pool)
    if timed_out and report is not None:
        report["time_limit_hit"] = True
    if counts is None:
        return 0
    target: dict[int, int] = {}
    for g, per_type in zip(groups, counts, strict=True):
        members = iter(g.members)  # the planned type first: those members keep their placements
        for k in [g.planned, *(k for k in range(len(per_type)) if k != g.planned)]:
            for _ in range(int(per_type[k])):
                target[next(members)] = k
    movers = sorted(
        (j for j in movable if target[j] != types[j]),
        key=lambda j: (-vals[movable[j]].request.num_gpus, j),
    )
    planned = {j: placed.pop(j) for j in movers}
    for plan in planned.values():
        give_back(plan, free)
    for k in sorted({target[j] for j in movers}):  # each type's movers, largest gang first
        only = one_type(free, k)
        lineage = object()  # ``only`` only loses GPUs from here on
        key = cache.fresh_key()  # ``only``'s memo key, new whenever it changes
        for j in movers:
            if target[j] == k:
                i = movable[j]
                typed = on_type(entries[i], vals[i], only, cache, ctx, lineage, key)
                if typed is not None:
                    placed[j] = typed
                    typed.take_from(only)
                    typed.take_from(free)
                    key = cache.fresh_key()
    # a type that could not hold a gang (its nodes fragmented): the planned placement, or the best
    for j in movers:
        if j not in placed:
            best = cache.best(entries[movable[j]], free)
            other = planned[j] if fits(planned[j], free) else (None if best is None else best[0])
            if other is not None:
                placed[j] = other
                other.take_from(free)
    return sum(1 for j in movers if j in placed and single_type(placed[j], n_types) != types[j])


def one_type(free: np.ndarray, k: int) -> np.ndarray:
    """The ``free`` GPUs of type ``k`` alone (a new ``[node, type]`` matrix)."""
    only = np.zeros_like(free)
    only[:, k] = free[:, k]
    return only


def candidate_on_type(
    entry: QueueEntry,
    v: JobValuation,
    free: np.ndarray,
    k: int,
    cache: CandidateCache,
    ctx: RoundContext,
) -> Candidate | None:
    """:func:`on_type` on the ``free`` GPUs of type ``k`` (None when they cannot hold the gang)."""
    only = one_type(free, k)
    if int(only[:, k].sum()) < entry.request.num_gpus:
        return None
    return on_type(entry, v, only, cache, ctx)


def on_type(
    entry: QueueEntry,
    v: JobValuation,
    free: np.ndarray,
    cache: CandidateCache,
    ctx: RoundContext,
    lineage: object | None = None,
    key: StateKey | None = None,
) -> Candidate | None:
    """The candidate of ``entry`` on ``free`` (GPUs of one type) that finishes it soonest, restart
    included (its running placement, if there, needs none; ties: fewer nodes, then position).
    ``lineage`` and ``key`` (``free``'s memo key): as :meth:`CandidateCache.candidates`."""
    cands = cache.candidates(entry, free, key, lineage)
    if not cands:
        return None
    rem = v.status.remaining_steps
    penalty = v.status.job.restart_cost_s(ctx.restart_penalty_s) if v.status.done_steps > 0 else 0.0
    return min(cands, key=lambda c: (rem / c.rate + (0.0 if c.kept else penalty), c.nodes))


def job_groups(
    movable: Mapping[int, int],
    placed: Mapping[int, Candidate],
    vals: list[JobValuation],
    ctx: RoundContext,
    deadlines: Mapping[int, float],
    bounds: Mapping[int, float] | None = None,
    best_s: Sequence[float] | Mapping[int, float] | None = None,
) -> list[Group]:
    """The movable jobs (job id -> index into ``vals``) as :class:`Group`\\ s: one class, planned
    type, rate and restart status. The members of a group that cannot finish within the round
    differ only in their remaining steps, which move every type's cost by the same amount, so one
    member's costs stand for all; jobs that may finish within it (best remaining time at most a
    round) are alike only within a slice of :data:`FINISHING_GRAIN_ROUNDS`. A job with a deadline (seconds from
    now: an overdue job's) may go only to the types that finish it by then if it stays there; a
    job with a bound (its finish-time fairness bound) only to those whose projected completion
    keeps it (the planned type always stays allowed); a job either of them binds is a group of
    its own. ``best_s``: the jobs' :func:`~hadar.scheduler.ttd.remaining_times` (indexed as
    ``vals``), when the caller has them."""
    bounds = bounds or {}
    cap = ctx.cluster.capacity
    if best_s is None:
        rates: dict[int, float] = {}
        best_s = {i: best_remaining_s(vals[i], ctx, rates) for i in movable.values()}
    type_rates: dict[int, np.ndarray] = {}
    keyed: dict[object, list[int]] = {}
    plan: dict[int, int] = {}
    for j in sorted(movable):
        v = vals[movable[j]]
        cand = placed[j]
        planned = single_type(cand, cap.shape[1])
        assert planned is not None  # movable jobs are planned on one type
        plan[j] = planned
        best = best_s[movable[j]]
        # any projected completion is at most a round + the best remaining time
        bound_binds = bounds.get(j, math.inf) < ctx.round_s * (1 + TIE_BREAK_ROUNDS) + best
        job = v.status.job  # its class (the request object is shared by class only as a speed-up)
        key: object = (
            job.job_type,
            job.num_gpus,
            planned,
            cand.kept,
            cand.rate,
            job.total_steps > v.status.remaining_steps,
        )
        if j in deadlines or bound_binds:
            key = j
        elif best <= ctx.round_s:
            key = (key, math.floor(best / (FINISHING_GRAIN_ROUNDS * ctx.round_s)))
        keyed.setdefault(key, []).append(j)
    firsts = [(members[0], vals[movable[members[0]]]) for members in keyed.values()]
    for _, v in firsts:
        r = v.request
        if id(r) not in type_rates:
            type_rates[id(r)] = best_rate_per_type(r.rates_cons, r.rates_unc, cap, r.num_gpus)
    n_types = cap.shape[1]
    n = len(firsts)
    rem = np.array([v.status.remaining_steps for _, v in firsts], dtype=float)
    best_time = np.array([best_s[movable[j]] for j, _ in firsts], dtype=float)
    started = np.array([v.status.done_steps > 0 for _, v in firsts], dtype=bool)
    kept = np.array([placed[j].kept for j, _ in firsts], dtype=bool)
    planned_type = np.array([plan[j] for j, _ in firsts], dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        best_rate = np.where((best_time > 0) & (best_time < math.inf), rem / best_time, 0.0)
    cost, stay = projected_completions(
        np.array([type_rates[id(v.request)] for _, v in firsts], dtype=float).reshape(n, n_types),
        planned_type,
        np.array([placed[j].rate for j, _ in firsts], dtype=float),
        started & ~kept,
        started,
        rem,
        best_rate,
        ctx.round_s,
        np.array([v.status.job.restart_cost_s(ctx.restart_penalty_s) for _, v in firsts]),
    )
    # a deadline (overdue job): the types that finish it by then if it stays; a bound: the types
    # whose projected completion keeps it; the planned type always stays allowed
    has_deadline = np.array([j in deadlines for j, _ in firsts], dtype=bool)
    deadline = np.array([deadlines.get(j, math.inf) + 1e-6 for j, _ in firsts], dtype=float)
    bound = np.array([bounds.get(j, math.inf) for j, _ in firsts], dtype=float)
    late = np.where(has_deadline[:, None], stay > deadline[:, None], cost > bound[:, None])
    late[np.arange(n), planned_type] = False
    cost[late] = math.inf
    groups = [
        Group(tuple(members), v.request.num_gpus, plan[j], cost[g])
        for g, (members, (j, v)) in enumerate(zip(keyed.values(), firsts, strict=True))
    ]
    return groups


def cheapest_alone(
    cost: np.ndarray, gangs: np.ndarray, size: np.ndarray, per_type: np.ndarray
) -> list[np.ndarray] | None:
    """The integer program's solution without solving it, when every group's cheapest type is
    unique and finite (``cost[group, type]``, inf where it may not go) and all of them fit at
    once: no other assignment costs as little, so it is the only optimum. None otherwise (ties,
    or the GPUs of some type do not suffice)."""
    n, n_types = cost.shape
    if n == 0:
        return None
    best = np.argmin(cost, axis=1)
    low = cost[np.arange(n), best]
    if not np.isfinite(low).all() or int((cost == low[:, None]).sum()) != n:
        return None
    used = np.bincount(best, weights=gangs * size, minlength=n_types)
    if bool((used > per_type).any()):
        return None
    x = np.zeros((n, n_types), dtype=int)
    x[np.arange(n), best] = size.astype(int)
    return list(x)


def solve_assignment(groups: list[Group], per_type: np.ndarray) -> list[np.ndarray] | None:
    """:func:`assign_types`'s counts alone."""
    return assign_types(groups, per_type)[0]


def assign_types(groups: list[Group], per_type: np.ndarray) -> tuple[list[np.ndarray] | None, bool]:
    """How many members of each group go to each GPU type, minimising the summed projected
    completion with at most ``per_type`` GPUs of each type (HiGHS), and whether the solver hit
    :data:`SOLVER_TIME_LIMIT_S`. None (the plan stands) when the solver found no solution in
    that time or only one that costs more than the plan (every group on its planned type)."""
    n_types = len(per_type)
    gangs = np.array([g.gang for g in groups], dtype=float)
    cost = np.array([g.cost for g in groups]).reshape(len(groups), n_types)
    size = np.array([len(g.members) for g in groups], dtype=float)
    ok = np.isfinite(cost) & (gangs[:, None] <= per_type[None, :])
    gi, ki = np.nonzero(ok)
    nv = len(gi)
    if nv == 0:
        return None, False
    alone = cheapest_alone(np.where(ok, cost, math.inf), gangs, size, per_type)
    if alone is not None:
        return alone, False
    # column c (group gi[c] on type ki[c]): 1 in its group's row, its gang in its type's row
    a = ColumnMatrix.pairs(gi, len(groups) + ki, gangs[gi], len(groups) + n_types)
    lower = np.concatenate([size, np.zeros(n_types)])
    upper = np.concatenate([size, per_type.astype(float)])
    res = solve_mip(cost[gi, ki], a, lower, upper, np.zeros(nv), size[gi], SOLVER_TIME_LIMIT_S)
    if res.x is None:
        return None, res.time_limit_hit
    x = np.zeros((len(groups), n_types), dtype=int)
    x[gi, ki] = np.round(res.x).astype(int)
    planned = float(sum(len(g.members) * g.cost[g.planned] for g in groups))
    if float((x * np.where(ok, cost, 0.0)).sum()) > planned:  # the plan is the better map
        return None, res.time_limit_hit
    return list(x), res.time_limit_hit
