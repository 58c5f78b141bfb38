"""Gavel (Narayanan et al., OSDI 2020): heterogeneity-aware policies + round-based mechanism.

The *policy* is an allocation ``x[j][k]``: the fraction of time job j should spend on GPU type
k (``baselines.gavel_lp``). The *mechanism* turns it into rounds, as Gavel's scheduler does:

* The allocation is recomputed when the job set (or the cluster) has changed, but at most once
  every ``reallocation_interval`` seconds (Gavel's ``minimum_time_between_allocation_resets``;
  0 = at every change). Recomputing also *resets* the time-received bookkeeping: each job's
  time on type k restarts at half a round (Gavel's seed, so a fresh job is not infinitely
  urgent) and the shortfall ``x * elapsed - received`` since the last reset is added to the
  job's per-type *deficit*. As in Gavel, a first allocation computed at time 0 does not start
  the interval (``last reset == 0`` always allows a reset), and a round after one in which
  nothing was scheduled may always reset (Gavel: only once no arrivals remain; a policy cannot
  see future arrivals).
* GPU types are walked fastest first, as Gavel walks ``v100, p100, k80``; "fastest" is measured
  (:func:`fastest_first`) over every job type the throughput table measured, never read from a
  GPU's name or datasheet; on Gavel's own table that is exactly Gavel's order.
* Priority of job j on type k = ``x[j][k] / (time j received on k / time all jobs received on
  k)`` since the last reset; 0 when x = 0, the rate is 0 or j arrived after the last
  allocation. Per GPU type, fastest type first, jobs are sorted by (priority, deficit, x)
  descending (ties: arrival order); the per-type lists are walked in turn (``global_queue``
  sorts all pairs together instead). A job is given exactly W GPUs of that one type if that
  many are still unclaimed and it has not been scheduled this round.
* Placement, per type, largest gangs first: a job keeps its last-round GPUs when they are all
  of this type and still free (no restart), otherwise takes W GPUs of the type on the fewest
  nodes (first nodes first). A job without an allocation yet (arrived since the last reset)
  that the walk picked keeps its GPUs idle this round, exactly as in Gavel's scheduler.

The LP throughputs are consolidated W-GPU rates; the simulator still charges the unconsolidated
rate when a placement spans nodes (unless Gavel-compatible mode replaces the model).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from baselines.gavel_lp import max_min_fairness, min_makespan
from hadar.core.cluster import Cluster
from hadar.core.jobs import Job, JobStatus, Placement
from hadar.placement import fewest_nodes
from hadar.policy import (
    Assignment,
    LineStyle,
    Policy,
    PolicyInfo,
    RoundContext,
    RoundPlan,
    register_policy,
)
from hadar.valuation import value_jobs

NO_TIME_PRIORITY = 1e9
"""Gavel's stand-in for "infinite" priority when a type has run nothing since the last reset."""


@dataclass(frozen=True)
class GavelConfig:
    """Knobs of the Gavel mechanism (defaults: Gavel's simulator, except the interval)."""

    reallocation_interval: float = 0.0
    """Seconds between allocation resets (Gavel: 1920; 0 = recompute at every job-set change)."""
    global_queue: bool = False
    """Sort (job, type) pairs across types instead of walking the types fastest first."""
    seed_fraction: float = 0.5
    """Time-received seed per job and type at each reset, in rounds (Gavel: half a round)."""
    scale_in_objective: bool = True
    """Max-min fairness: multiply the normalised throughput by the scale factor W (Gavel)."""

    def __post_init__(self) -> None:
        if self.reallocation_interval < 0:
            raise ValueError("reallocation_interval must be >= 0")
        if self.seed_fraction < 0:
            raise ValueError("seed_fraction must be >= 0")


def fastest_first(gpu_types: Sequence[str], rates: np.ndarray) -> list[str]:
    """GPU types ordered by the measured throughput of the given jobs, fastest first.

    ``rates[job, type]`` (columns in ``gpu_types`` order). A type's score is the mean over the
    jobs that can run somewhere of their rate on it relative to their best rate, so the order
    follows the measurements, never a GPU's name or datasheet: over Gavel's K80/P100/V100 table it
    is Gavel's own ``v100, p100, k80``. Ties keep the cluster's order."""
    rates = np.asarray(rates, dtype=float).reshape(-1, len(gpu_types))
    best = rates.max(axis=1, initial=0.0)
    ok = best > 0
    score = (rates[ok] / best[ok, None]).mean(axis=0) if ok.any() else np.zeros(len(gpu_types))
    order = sorted(range(len(gpu_types)), key=lambda i: (-score[i], i))
    return [gpu_types[i] for i in order]


_Signature = tuple[frozenset[int], tuple[str, ...], tuple[int, ...]]
"""The job set, GPU types and GPU counts of the last allocation (a change calls for a new one)."""


@register_policy
class GavelPolicy(Policy):
    """Gavel's heterogeneity-aware max-min fairness (``max_min_fairness_perf``)."""

    name = "gavel"
    info = PolicyInfo(
        title="Gavel",
        colour="tab:orange",
        line=LineStyle("-", "^", 1.6),
        gavel_native=True,
        defaults=frozenset({"compare", "compare-elastic", "load-sweep", "decision-times"}),
        rank=30,
    )
    config_class = GavelConfig
    skip_zero_priority = False

    def __init__(self, config: GavelConfig | None = None, **knobs: object) -> None:
        self.config = config or GavelConfig(**knobs)  # type: ignore[arg-type]
        self._x: dict[int, dict[str, float]] = {}
        self._base: dict[int, dict[str, float]] = {}
        self._deficit: dict[int, dict[str, float]] = {}
        self._signature: _Signature | None = None
        self._need_update = False
        self._last_reset = 0.0
        self._scheduled_last: int | None = None
        self._order_cache: dict[tuple[tuple[str, ...], int], list[str]] = {}

    # -- the state a resumed run restores (hadar/loop.py persists it every round) -------------
    def state(self) -> dict[str, Any]:
        """The mechanism's bookkeeping: allocation, time-received bases, deficits, the job set
        of the last allocation and the time of the last reset (JSON; job ids become strings)."""
        sig = self._signature
        return {
            "x": _by_job(self._x),
            "base": _by_job(self._base),
            "deficit": _by_job(self._deficit),
            "signature": None if sig is None else [sorted(sig[0]), list(sig[1]), list(sig[2])],
            "need_update": self._need_update,
            "last_reset": self._last_reset,
            "scheduled_last": self._scheduled_last,
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        if not state:
            return
        self._x, self._base, self._deficit = (
            _from_json(state[k]) for k in ("x", "base", "deficit")
        )
        sig = state["signature"]
        self._signature = None if sig is None else (frozenset(sig[0]), tuple(sig[1]), tuple(sig[2]))
        self._need_update = bool(state["need_update"])
        self._last_reset = float(state["last_reset"])
        self._scheduled_last = state["scheduled_last"]

    # -- the policy (overridden by the variants) -------------------------------------------
    def allocate(
        self, statuses: Sequence[JobStatus], T: np.ndarray, counts: np.ndarray, types: Sequence[str]
    ) -> np.ndarray:
        """The allocation ``x[job, type]`` for ``statuses`` (rows) on ``types`` (columns)."""
        W = np.array([s.job.num_gpus for s in statuses], dtype=float)
        weights = np.array([s.job.weight for s in statuses], dtype=float)
        return max_min_fairness(T, W, counts, weights, self.config.scale_in_objective).x

    # -- the mechanism -----------------------------------------------------------------------
    def decide(self, ctx: RoundContext) -> RoundPlan:
        in_cluster_order = _type_rates(ctx, ctx.cluster.gpu_types)
        types = self._type_order(ctx, in_cluster_order)
        order = [ctx.cluster.type_index[k] for k in types]
        rates = {j: r[order] for j, r in in_cluster_order.items()}
        counts = np.array([ctx.cluster.gpus_of_type(k) for k in types])
        self._track(ctx, types, counts)
        solved = False
        if self._need_update and self._may_reset(ctx):
            self._reset(ctx, types)
            T = np.array([rates[s.job_id] for s in ctx.jobs]).reshape(len(ctx.jobs), len(types))
            x = self.allocate(ctx.jobs, T, counts, types)
            self._x = {
                s.job_id: dict(zip(types, map(float, x[i]), strict=True))
                for i, s in enumerate(ctx.jobs)
            }
            self._need_update = False
            solved = True
        chosen = self._select(ctx, types, counts, rates)
        assignments, idle = self._place(ctx, types, chosen)
        self._scheduled_last = len(assignments)
        info = {
            "lp_solved": solved,
            "allocated_jobs": len(self._x),
            "scheduled": len(assignments),
            "idle_claimed_gpus": idle,
        }
        return RoundPlan(tuple(sorted(assignments, key=lambda a: a.job_id)), info)

    def _type_order(self, ctx: RoundContext, job_rates: Mapping[int, np.ndarray]) -> list[str]:
        """The walk order, fastest type first, measured over every (job type, W) the throughput
        model holds measurements for (static for a run, so it is cached), or over the jobs at hand
        when it measured nothing."""
        key = (ctx.cluster.gpu_types, id(ctx.throughput))
        hit = self._order_cache.get(key)
        if hit is None:
            reference = ctx.throughput.reference_job_types()
            if not reference:
                return fastest_first(
                    ctx.cluster.gpu_types, np.array([job_rates[s.job_id] for s in ctx.jobs])
                )
            refs = [JobStatus(Job(-1 - i, jt, w, 1.0), 1.0) for i, (jt, w) in enumerate(reference)]
            rows = np.array([v.type_rates for v in value_jobs(ctx, refs)])
            hit = self._order_cache[key] = fastest_first(ctx.cluster.gpu_types, rows)
        return hit

    def _track(self, ctx: RoundContext, types: Sequence[str], counts: np.ndarray) -> None:
        """Note arrivals, completions and cluster changes (they call for a new allocation)."""
        ids = [s.job_id for s in ctx.jobs]
        signature = (frozenset(ids), tuple(types), tuple(int(c) for c in counts))
        if signature != self._signature:
            self._need_update = True
            self._signature = signature
        for s in ctx.jobs:
            if s.job_id not in self._base:
                self._base[s.job_id] = dict(s.time_on_type)
                self._deficit[s.job_id] = {}
        gone = set(self._base) - set(ids)
        for j in gone:
            self._base.pop(j, None)
            self._deficit.pop(j, None)
            self._x.pop(j, None)

    def _may_reset(self, ctx: RoundContext) -> bool:
        """Gavel's rule: the interval has passed or the last reset was at time 0; and, as Gavel
        does once no arrivals remain, after a round in which nothing was scheduled."""
        return (
            ctx.now - self._last_reset >= self.config.reallocation_interval
            or self._last_reset == 0.0
            or self._scheduled_last == 0
        )

    def _reset(self, ctx: RoundContext, types: Sequence[str]) -> None:
        elapsed = ctx.now - self._last_reset
        for s in ctx.jobs:
            base, deficit, x = (
                self._base[s.job_id],
                self._deficit[s.job_id],
                self._x.get(s.job_id, {}),
            )
            for k in types:
                received = s.time_on_type.get(k, 0.0) - base.get(k, 0.0)
                deficit[k] = deficit.get(k, 0.0) + x.get(k, 0.0) * elapsed - received
            self._base[s.job_id] = dict(s.time_on_type)
        self._last_reset = ctx.now

    def priorities(
        self, ctx: RoundContext, types: Sequence[str], rates: Mapping[int, np.ndarray]
    ) -> np.ndarray:
        """``priority[job, type]`` in ``ctx.jobs`` order (see the module docstring)."""
        seed = self.config.seed_fraction * ctx.round_s
        got = np.array(
            [
                [
                    seed + s.time_on_type.get(k, 0.0) - self._base[s.job_id].get(k, 0.0)
                    for k in types
                ]
                for s in ctx.jobs
            ]
        ).reshape(len(ctx.jobs), len(types))
        total = got.sum(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(total > 0, got / total, 0.0)
        x = np.array(
            [
                [self._x[s.job_id][k] if s.job_id in self._x else 0.0 for k in types]
                for s in ctx.jobs
            ]
        ).reshape(len(ctx.jobs), len(types))
        r = np.array([rates[s.job_id] for s in ctx.jobs]).reshape(len(ctx.jobs), len(types))
        with np.errstate(divide="ignore", invalid="ignore"):
            prio = np.where(frac > 0, x / frac, x * NO_TIME_PRIORITY)
        prio[(x <= 0) | (r <= 0)] = 0.0
        return prio

    def _select(
        self,
        ctx: RoundContext,
        types: Sequence[str],
        counts: np.ndarray,
        rates: Mapping[int, np.ndarray],
    ) -> dict[str, list[JobStatus]]:
        """Walk (job, type) pairs by priority; a job gets W GPUs of one type if unclaimed."""
        prio = self.priorities(ctx, types, rates)
        entries = []
        for ki, k in enumerate(types):
            per_type = []
            for i, s in enumerate(ctx.jobs):
                x = self._x.get(s.job_id, {}).get(k, 0.0)
                per_type.append((prio[i, ki], self._deficit[s.job_id].get(k, 0.0), x, i, ki))
            # Stable sort, descending keys: equal keys keep arrival order (Gavel: job id order).
            per_type.sort(key=lambda e: (e[0], e[1], e[2]), reverse=True)
            entries += per_type
        if self.config.global_queue:
            entries.sort(key=lambda e: (e[0], e[1], e[2]), reverse=True)
        left = {k: int(c) for k, c in zip(types, counts, strict=True)}
        done: set[int] = set()
        chosen: dict[str, list[JobStatus]] = {k: [] for k in types}
        for p, _, _, i, ki in entries:
            k, s = types[ki], ctx.jobs[i]
            w = s.job.num_gpus
            if left[k] == 0 or s.job_id in done or rates[s.job_id][ki] <= 0:
                continue
            if self.skip_zero_priority and p <= 0:
                continue
            if w > left[k]:
                continue
            left[k] -= w
            done.add(s.job_id)
            chosen[k].append(s)
        return chosen

    def _place(
        self, ctx: RoundContext, types: Sequence[str], chosen: Mapping[str, list[JobStatus]]
    ) -> tuple[list[Assignment], int]:
        cluster = ctx.cluster
        free = cluster.capacity.copy()
        out: list[Assignment] = []
        idle = 0
        for k in types:
            column = np.zeros_like(free, dtype=bool)
            column[:, cluster.type_index[k]] = True
            jobs = chosen[k]
            for w in sorted({s.job.num_gpus for s in jobs}, reverse=True):
                level = [s for s in jobs if s.job.num_gpus == w]
                kept: set[int] = set()
                for s in level:
                    prev = ctx.current.get((s.job_id, 0))
                    y = _matrix_if_valid(prev, cluster)
                    if (
                        prev
                        and y is not None
                        and not ((y > 0) & ~column).any()
                        and (y <= free).all()
                    ):
                        free -= y
                        out.append(Assignment(s.job_id, prev))
                        kept.add(s.job_id)
                for s in level:
                    if s.job_id in kept:
                        continue
                    if s.job_id not in self._x:
                        idle += w  # claimed by the walk but never assigned (Gavel)
                        continue
                    alloc = fewest_nodes(free, column, w)
                    if alloc is None:  # cannot happen: the walk counted this type's GPUs
                        continue
                    free -= alloc
                    out.append(Assignment(s.job_id, cluster.placement_from_matrix(alloc)))
        return out, idle


@register_policy
class GavelFifoPolicy(GavelPolicy):
    """Gavel's heterogeneity-aware FIFO (``fifo_perf``): in arrival order, each job is given its
    fastest GPU type among those with W GPUs not yet promised (x = 1 there); the first job that
    fits nowhere stops the allocation. Jobs with priority 0 are never scheduled."""

    name = "gavel-fifo"
    info = PolicyInfo(title="Gavel (FIFO)", colour="tab:brown", gavel_native=True, rank=31)
    skip_zero_priority = True

    def allocate(
        self, statuses: Sequence[JobStatus], T: np.ndarray, counts: np.ndarray, types: Sequence[str]
    ) -> np.ndarray:
        x = np.zeros_like(T)
        avail = counts.astype(int).copy()
        for i, s in enumerate(statuses):
            fits = np.flatnonzero(avail >= s.job.num_gpus)
            if not fits.size:
                break
            k = int(fits[np.argmax(T[i, fits])])
            if T[i, k] <= 0:
                continue
            x[i, k] = 1.0
            avail[k] -= s.job.num_gpus
        return x


@register_policy
class GavelMakespanPolicy(GavelPolicy):
    """Gavel's min-makespan (``min_total_duration``): the allocation that lets every job finish
    its remaining steps soonest, one LP with level 1/makespan."""

    name = "gavel-makespan"
    info = PolicyInfo(title="Gavel (makespan)", colour="tab:pink", gavel_native=True, rank=32)

    def allocate(
        self, statuses: Sequence[JobStatus], T: np.ndarray, counts: np.ndarray, types: Sequence[str]
    ) -> np.ndarray:
        W = np.array([s.job.num_gpus for s in statuses], dtype=float)
        remaining = np.array([s.remaining_steps for s in statuses], dtype=float)
        return min_makespan(T, W, counts, remaining).x


def _type_rates(ctx: RoundContext, types: Sequence[str]) -> dict[int, np.ndarray]:
    """Each job's best consolidated W-GPU rate per type (columns in ``types`` order)."""
    order = [ctx.cluster.type_index[k] for k in types]
    return {v.status.job_id: v.type_rates[order] for v in value_jobs(ctx, ctx.jobs)}


def _by_job(table: Mapping[int, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    return {str(j): dict(per) for j, per in table.items()}


def _from_json(table: Mapping[str, Mapping[str, float]]) -> dict[int, dict[str, float]]:
    return {int(j): {k: float(v) for k, v in per.items()} for j, per in table.items()}


def _matrix_if_valid(placement: Placement | None, cluster: Cluster) -> np.ndarray | None:
    """``placement`` as a ``[node, type]`` matrix, or None if absent or not on ``cluster``."""
    if not placement:
        return None
    try:
        return cluster.placement_matrix(placement)
    except KeyError:
        return None
