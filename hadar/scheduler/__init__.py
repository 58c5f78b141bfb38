"""The Hadar policy: Algorithm 1, one round at a time (docs/hadar.md).

Each round the policy values every job (rates, utility), sets the round's GPU prices
(``price_model``: by default per type, the dual of the round's allocation LP; ``exponential``
is Eq. 5-7 with price bounds over the known jobs) and runs one of two round algorithms, chosen
by the ``replan`` knob:

* ``preempt`` (default, :mod:`hadar.scheduler.preemptive`): every job, running or not, is
  re-planned each round. Critical-path jobs (the TTD guard) and then overdue jobs (the deferral
  bounds: finish-time fairness ``max_rho``, wall-clock ``max_wait_s``) are placed first; the DP (Algorithm 2) over a window of the rest selects
  which run, running jobs it keeps stay on their GPUs, the others take the placement the DP chose
  or the best left; idle GPUs are backfilled at zero price; type matching re-assigns the chosen
  jobs' GPU types (:mod:`hadar.scheduler.matching`); a kept job moves onto faster idle GPUs when
  that finishes it ``upgrade_min_gain_s`` sooner, restart included. The tail guard protects the
  p99 JCT like the TTD guard the largest (:mod:`hadar.scheduler.tail`), and the endgame plans the
  last rounds round by round (:mod:`hadar.scheduler.endgame`).
* ``upgrade`` / ``never`` (the legacy configuration, :mod:`hadar.scheduler.non_preemptive`):
  running jobs keep their placement (the paper's "only newly arrived or preempted jobs are
  allocated"); the queue is admitted onto the GPUs left (DP window, greedy remainder, backfill)
  and, with ``upgrade``, a running job moves onto GPUs still idle under the same gain rule.

The steps both use (admission, backfill, upgrades) are in :mod:`hadar.scheduler.steps`, the
knobs in :mod:`hadar.scheduler.config`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from hadar.core.collector import cyclic_gc_paused
from hadar.core.jobs import Placement
from hadar.core.threads import one_blas_thread
from hadar.policy import LineStyle, Policy, PolicyInfo, RoundContext, RoundPlan, register_policy
from hadar.reference_rates import best_rate_per_type
from hadar.scheduler import non_preemptive, preemptive
from hadar.scheduler.config import DEFAULT_MAX_RHO, TTD_BOUNDS, TTD_SLACK_ROUNDS, HadarConfig
from hadar.scheduler.contention import Contention
from hadar.scheduler.elastic import ConfigurationMemo, elastic_round
from hadar.scheduler.preemptive import deadline_candidate, deferred_rho, overdue_jobs
from hadar.scheduler.steps import (
    admit,
    backfill,
    fits,
    job_id_of,
    placement_of,
)
from hadar.scheduler.tail import Finished
from hadar.scheduler.ttd import (
    CRITICAL_TOLERANCE_ROUNDS,
    best_remaining_s,
    critical_jobs,
    guard_candidate,
)
from hadar.valuation import JobValuation, queue_entry, round_price_bounds, single_node, value_jobs
from primal_dual.dp import CandidateCache, QueueEntry
from primal_dual.find_alloc import JobRequest
from primal_dual.lp_prices import type_prices
from primal_dual.utility import Utility, make_utility

__all__ = [
    "CRITICAL_TOLERANCE_ROUNDS",
    "DEFAULT_MAX_RHO",
    "TTD_BOUNDS",
    "TTD_SLACK_ROUNDS",
    "Contention",
    "HadarConfig",
    "HadarLegacyPolicy",
    "HadarPolicy",
    "admit",
    "at_fastest_rate",
    "backfill",
    "best_remaining_s",
    "critical_jobs",
    "cyclic_gc_paused",
    "deadline_candidate",
    "deferred_rho",
    "fits",
    "guard_candidate",
    "job_id_of",
    "overdue_jobs",
    "placement_of",
    "round_type_prices",
    "type_rates_alone",
    "upgrade_running",
]


@register_policy
class HadarPolicy(Policy):
    """Task-level heterogeneity-aware primal-dual scheduling (Hadar)."""

    name = "hadar"
    info = PolicyInfo(
        title="Hadar",
        colour="tab:blue",
        # drawn wide and solid, HadarE narrow and dashed on top of it: where the two curves
        # coincide (small workloads) both stay visible
        line=LineStyle("-", "o", 3.0),
        defaults=frozenset({"compare", "compare-elastic", "load-sweep", "decision-times"}),
        rank=10,
        reference=True,
    )
    config_class = HadarConfig

    def __init__(self, config: HadarConfig | None = None, **knobs: object) -> None:
        self.config = config or HadarConfig(**knobs)  # type: ignore[arg-type]
        self.utility = self._make_utility(self.config.utility)
        self.elastic_utility = (
            None
            if self.config.elastic_utility is None
            else self._make_utility(self.config.elastic_utility)
        )
        self.contention = Contention()
        self.finished = Finished()
        self.configurations = ConfigurationMemo()

    def _make_utility(self, name: str) -> Utility:
        params = {"gamma2": self.config.gamma2} if name == "sigmoid" else {}
        return make_utility(name, **params)

    def state(self) -> dict[str, Any]:
        """The contention bookkeeping of the finish-time fairness bound and the finished jobs'
        JCTs of the tail guard (each only when used)."""
        out: dict[str, Any] = {}
        if self.contention.t is not None:
            out["contention"] = self.contention.to_json()
        if self.finished.arrivals or self.finished.jcts:
            out["tail"] = self.finished.to_json()
        return out

    def restore(self, state: Mapping[str, Any]) -> None:
        if set(state) - {"contention", "tail"}:
            raise ValueError(
                f"policy {self.name} keeps no state other than 'contention' and 'tail', "
                f"got {sorted(state)}"
            )
        self.contention = (
            Contention.from_json(state["contention"]) if "contention" in state else Contention()
        )
        self.finished = Finished.from_json(state["tail"]) if "tail" in state else Finished()

    def decide(self, ctx: RoundContext) -> RoundPlan:
        with cyclic_gc_paused(), one_blas_thread():
            return self._decide(ctx)

    def _decide(self, ctx: RoundContext) -> RoundPlan:
        self.utility = at_round(self.utility, ctx.round_s)
        if not self.config.adapt_elastic:
            return self._decide_rigid(ctx)
        utility = self.utility
        if self.elastic_utility is not None:
            utility = self.elastic_utility = at_round(self.elastic_utility, ctx.round_s)
        view = elastic_round(ctx, utility, self.config.upgrade_min_gain_s, self.configurations)
        return view.finish(self._decide_rigid(view.ctx), ctx)

    def _decide_rigid(self, ctx: RoundContext) -> RoundPlan:
        """The round with every job a rigid gang of its own size."""
        if self.config.replan == "preempt":
            return self._decide_preemptive(ctx)
        return non_preemptive.decide(self, ctx)

    def _decide_preemptive(self, ctx: RoundContext) -> RoundPlan:
        """The preemptive round (:func:`hadar.scheduler.preemptive.decide`)."""
        return preemptive.decide(self, ctx)

    def upgrade(
        self,
        running: Mapping[int, Placement],
        vals: Mapping[int, JobValuation],
        free: np.ndarray,
        ctx: RoundContext,
    ) -> tuple[dict[int, Placement], int]:
        """The upgrade step of either round (:func:`upgrade_running`, this policy's gain)."""
        return upgrade_running(running, vals, free, ctx, self.config.upgrade_min_gain_s)

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
        self.utility = at_round(self.utility, ctx.round_s)
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


@register_policy
class HadarLegacyPolicy(HadarPolicy):
    """Hadar with its original configuration (:meth:`HadarConfig.legacy`), for comparisons."""

    name = "hadar-legacy"
    info = PolicyInfo(title="Hadar (legacy)", colour="tab:cyan", rank=11)

    def __init__(self, config: HadarConfig | None = None, **knobs: object) -> None:
        super().__init__(config or replace(HadarConfig.legacy(), **knobs))  # type: ignore[arg-type]


def at_round(utility: Utility, round_s: float) -> Utility:
    """``utility`` with its round set to ``round_s`` where it has one (the round-progress
    utility counts service in rounds); itself where nothing changes."""
    if hasattr(utility, "round_s") and utility.round_s != round_s:
        return replace(utility, round_s=round_s)  # type: ignore[type-var]
    return utility


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


def type_rates_alone(v: JobValuation, capacity: np.ndarray) -> np.ndarray:
    """Per type, the gang's fastest rate on that type alone: consolidated on a node with W of them,
    else across nodes when the type has W in all; 0 when it cannot hold the gang."""
    r = v.request
    return best_rate_per_type(r.rates_cons, r.rates_unc, capacity, r.num_gpus)


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
        gain = rem / old_rate - (
            rem / best.rate + v.status.job.restart_cost_s(ctx.restart_penalty_s)
        )
        if gain > min_gain_s and not np.array_equal(best.alloc, own):
            out[job_id] = ctx.cluster.placement_from_matrix(best.alloc)
            free += own - best.alloc
            moved += 1
    return out, moved
