"""Hadar's type matching (``type_matching``; docs/hadar.md, "Type matching"): once the round's
jobs are chosen, which GPU type each runs on.

The DP chooses *which* jobs run by the utility (inverse remaining time: shortest remaining first,
the order that minimises the number of jobs waiting). Its payoffs also choose the *type*, and
there the same utility misleads: ``U = 3600 / tau`` values a GPU type by how much sooner it
finishes the job *relative to its remaining time*, so every fast GPU goes to a short job and a
long job whose speed-up on fast GPUs is the largest (a Transformer, 5.6x faster on a V100 than
on a K80) runs on the slowest type for hours. A round on a slow type is not lost time only for
the job: the work it leaves undone must be done later, and under load that later work delays
every job behind it.

The matching re-assigns the GPU types of the jobs the DP chose (the TTD guard's, the tail
guard's and overdue jobs keep the placements their deadlines chose) to minimise the sum of their
projected completion times after this round: a job on type k finishes within the round at
``tau_k`` (restart included), else at ``round + (remaining - progress_k) / best rate`` (it runs
on its fastest placement afterwards), so a job that does not finish this round gains
``round x rate_k / best rate`` (its normalised speed, the quantity Gavel's heterogeneity-aware
policies maximise), whatever its length, and a job that finishes gains the seconds a faster type
saves it. Per type, the jobs' GPUs may not exceed what the chosen jobs hold plus the idle GPUs.
It is a small integer program (jobs of one class in the same situation are one integer
variable), solved with HiGHS. The jobs are then placed type by type, gangs first; a job whose
type cannot hold its gang (nodes fragmented) keeps its planned placement where still free, else
takes the fastest left.

Ties (e.g. GPU types equally fast for every job) keep the DP's plan: moving off it costs a
millionth of a round.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from hadar.policy import RoundContext
from hadar.reference_rates import best_rate_per_type
from hadar.scheduler.ttd import best_remaining_s
from hadar.valuation import JobValuation
from primal_dual.dp import CandidateCache, QueueEntry
from primal_dual.find_alloc import Candidate

TIE_BREAK_ROUNDS = 1e-6
"""Cost of leaving the DP's planned type, in rounds: equal-cost assignments keep the plan."""


@dataclass(frozen=True)
class _Group:
    """Jobs the matching treats alike: one class (request), one planned type, one restart status
    and none finishing within the round (else the job is its own group)."""

    members: tuple[int, ...]
    gang: int
    planned: int
    """The GPU type the DP planned for them."""
    cost: np.ndarray
    """Per type, projected completion seconds of one member (inf: cannot run there)."""


def single_type(cand: Candidate) -> int | None:
    """The one GPU type a placement uses, or None when it spans several."""
    types = {i % cand.alloc.shape[1] for i in cand.cells[0]}
    return types.pop() if len(types) == 1 else None


def projected_costs(
    v: JobValuation, cand: Candidate, ctx: RoundContext, rates: np.ndarray, best_s: float
) -> np.ndarray:
    """Per GPU type, the seconds from now at which the job would finish if it ran this round on
    that type (``rates``: its fastest rate per type) and then on its fastest placement; its
    planned type at the planned candidate's own rate and restart status."""
    rem = v.status.remaining_steps
    started = v.status.done_steps > 0
    planned = single_type(cand)
    out = np.full(len(rates), math.inf)
    best_rate = rem / best_s if best_s > 0 and math.isfinite(best_s) else 0.0
    for k, rate in enumerate(rates):
        restart = 0.0
        if k == planned:
            rate, restart = cand.rate, (0.0 if cand.kept or not started else ctx.restart_penalty_s)
        elif started:
            restart = ctx.restart_penalty_s
        if rate <= 0 or best_rate <= 0:
            continue
        tau = restart + rem / rate
        if tau <= ctx.round_s:
            out[k] = tau
        else:
            done = rate * max(0.0, ctx.round_s - restart)
            out[k] = ctx.round_s + (rem - done) / best_rate
        if k != planned:
            out[k] += TIE_BREAK_ROUNDS * ctx.round_s
    return out


def match_types(
    chosen: Mapping[int, int],
    placed: dict[int, Candidate],
    vals: list[JobValuation],
    entries: list[QueueEntry],
    free: np.ndarray,
    ctx: RoundContext,
    cache: CandidateCache,
) -> int:
    """Re-assign the GPU types of the jobs ``chosen`` (job id -> index into ``vals``/``entries``)
    among the GPUs they hold in ``placed`` and the ``free`` ones (module docstring). Mutates
    ``placed`` and ``free``; returns how many jobs changed type."""
    cap = ctx.cluster.capacity
    movable = {j: i for j, i in chosen.items() if single_type(placed[j]) is not None}
    if len(movable) < 2:
        return 0
    groups = _groups(movable, placed, vals, ctx, cap)
    pool = free.copy()
    for j in movable:
        pool += placed[j].alloc
    counts = _solve(groups, pool.sum(axis=0))
    if counts is None:
        return 0
    target: dict[int, int] = {}
    for g, per_type in zip(groups, counts, strict=True):
        members = list(g.members)  # the planned type first: those members keep their placements
        for k in [g.planned, *(k for k in range(len(per_type)) if k != g.planned)]:
            for _ in range(int(per_type[k])):
                target[members.pop(0)] = k
    movers = [j for j in movable if target.get(j, single_type(placed[j])) != single_type(placed[j])]
    if not movers:
        return 0
    for j in movers:
        free += placed[j].alloc
    changed = 0
    for j in sorted(movers, key=lambda j: (-vals[movable[j]].request.num_gpus, j)):
        i = movable[j]
        planned = placed[j]
        cand = _on_type(entries[i], vals[i], free, target[j], cache, ctx)
        if cand is None:  # the type cannot hold the gang now (nodes fragmented)
            if _fits(planned, free):
                cand = planned
            else:
                best = cache.best(entries[i], free)
                cand = None if best is None else best[0]
        if cand is None:
            del placed[j]
            continue
        changed += cand is not planned
        placed[j] = cand
        cand.take_from(free)
    return changed


def _fits(cand: Candidate, free: np.ndarray) -> bool:
    return bool((cand.alloc <= free).all())


def _on_type(
    entry: QueueEntry,
    v: JobValuation,
    free: np.ndarray,
    k: int,
    cache: CandidateCache,
    ctx: RoundContext,
) -> Candidate | None:
    """The candidate of ``entry`` on type ``k`` alone that finishes it soonest, restart included
    (its running placement, if there, needs none; ties: fewer nodes, then position)."""
    only = np.zeros_like(free)
    only[:, k] = free[:, k]
    if int(only.sum()) < entry.request.num_gpus:
        return None
    cands = cache.candidates(entry, only)
    if not cands:
        return None
    rem = v.status.remaining_steps
    penalty = ctx.restart_penalty_s if v.status.done_steps > 0 else 0.0
    return min(cands, key=lambda c: (rem / c.rate + (0.0 if c.kept else penalty), c.nodes))


def _groups(
    movable: Mapping[int, int],
    placed: Mapping[int, Candidate],
    vals: list[JobValuation],
    ctx: RoundContext,
    cap: np.ndarray,
) -> list[_Group]:
    memo: dict[int, float] = {}
    type_rates: dict[int, np.ndarray] = {}
    keyed: dict[object, list[int]] = {}
    costs: dict[int, np.ndarray] = {}
    for j in sorted(movable):
        v = vals[movable[j]]
        r = v.request
        if id(r) not in type_rates:
            type_rates[id(r)] = best_rate_per_type(r.rates_cons, r.rates_unc, cap, r.num_gpus)
        cand = placed[j]
        cost = projected_costs(v, cand, ctx, type_rates[id(r)], best_remaining_s(v, ctx, memo))
        costs[j] = cost
        finishes = bool((cost < ctx.round_s).any())
        key: object = (
            j
            if finishes
            else (id(r), single_type(cand), cand.kept, cand.rate, v.status.done_steps > 0)
        )
        keyed.setdefault(key, []).append(j)
    return [
        _Group(
            tuple(m),
            vals[movable[m[0]]].request.num_gpus,
            int(single_type(placed[m[0]]) or 0),
            costs[m[0]],
        )
        for m in keyed.values()
    ]


def _solve(groups: list[_Group], per_type: np.ndarray) -> list[np.ndarray] | None:
    """Integer counts per group and type minimising the summed projected completion (HiGHS);
    None if the solver finds no solution (the plan then stands)."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    n_types = len(per_type)
    n = len(groups) * n_types
    c = np.zeros(n)
    upper = np.zeros(n)
    for g_i, g in enumerate(groups):
        for k in range(n_types):
            ok = math.isfinite(g.cost[k]) and g.gang <= per_type[k]
            c[g_i * n_types + k] = g.cost[k] if ok else 0.0
            upper[g_i * n_types + k] = len(g.members) if ok else 0
    rows: list[np.ndarray] = []
    lower_b: list[float] = []
    upper_b: list[float] = []
    for g_i, g in enumerate(groups):  # every member of a group is assigned a type
        row = np.zeros(n)
        row[g_i * n_types : (g_i + 1) * n_types] = 1
        rows.append(row)
        lower_b.append(len(g.members))
        upper_b.append(len(g.members))
    for k in range(n_types):  # the GPUs of each type
        row = np.zeros(n)
        for g_i, g in enumerate(groups):
            row[g_i * n_types + k] = g.gang
        rows.append(row)
        lower_b.append(0)
        upper_b.append(float(per_type[k]))
    res = milp(
        c,
        constraints=LinearConstraint(np.array(rows), lower_b, upper_b),
        integrality=np.ones(n),
        bounds=Bounds(np.zeros(n), upper),
        options={"time_limit": 2.0},
    )
    if res.x is None:
        return None
    x = np.round(res.x).astype(int)
    return [x[g_i * n_types : (g_i + 1) * n_types] for g_i in range(len(groups))]
