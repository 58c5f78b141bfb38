"""How Hadar values a job in a round: rates, ideal duration, utility of an allocation, and the
price bounds (Eq. 6-7) over the jobs known now. Pure functions of the round context."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from hadar.core.cluster import Cluster
from hadar.core.jobs import JobStatus
from hadar.policy import RoundContext
from primal_dual.dp import QueueEntry, one_round
from primal_dual.find_alloc import PRUNE_ABOVE_NODES, JobRequest, static_node_groups
from primal_dual.prices import PriceBounds, price_bounds
from primal_dual.utility import Utility, rate_utility


@dataclass(frozen=True)
class JobValuation:
    """A job's figures for this round."""

    status: JobStatus
    request: JobRequest
    type_rates: np.ndarray
    """Best consolidated rate per GPU type (0 = cannot run on that type)."""
    ideal: float
    """Duration of the whole job on its fastest placement (gamma3)."""


def value_jobs(ctx: RoundContext, statuses: Sequence[JobStatus]) -> list[JobValuation]:
    """Rates and ideal durations of ``statuses`` on ``ctx.cluster``."""
    out = []
    # per class: its request, best consolidated rate per type, and the fastest of those
    requests: dict[Hashable, tuple[JobRequest, np.ndarray, float]] = {}
    cap = ctx.cluster.capacity
    big = cap.shape[0] > PRUNE_ABOVE_NODES
    for st in statuses:
        cls = ctx.throughput.rate_class(st.job)
        hit = requests.get(cls)
        if hit is None:
            cons, unc = ctx.throughput.cell_rates(st.job, ctx.cluster)
            groups = static_node_groups(cap, cons, unc) if big else None
            type_rates = np.where(cap > 0, cons, 0.0).max(axis=0) if cap.size else np.zeros(0)
            request = JobRequest(st.job.num_gpus, cons, unc, groups)
            hit = requests[cls] = (request, type_rates, float(type_rates.max(initial=0.0)))
        request, type_rates, best = hit
        ideal = st.job.total_steps / best if best > 0 else math.inf
        out.append(JobValuation(st, request, type_rates, ideal))
    return out


def queue_entry(
    v: JobValuation,
    ctx: RoundContext,
    utility: Utility,
    hold_cost: bool,
    key: object | None = None,
    class_key: object | None = None,
    keep: np.ndarray | None = None,
    move_min_gain_s: float = 0.0,
) -> QueueEntry:
    """The DP's view of a job: utility and hold-rounds as functions of the allocation's rate.

    A job that has made progress pays the checkpoint-restart penalty on any placement except
    ``keep`` (its running placement, ``[node, type]``), which is offered as a candidate too; while
    that placement is free, the job moves only to a placement that finishes it more than
    ``move_min_gain_s`` sooner, restart included."""
    job = v.status.job
    remaining = v.status.remaining_steps
    restart_s = job.restart_cost_s(ctx.restart_penalty_s)
    penalty = restart_s if v.status.done_steps > 0 else 0.0
    origin = ctx.now - job.arrival if utility.clock == "arrival" else 0.0
    weight, ideal, round_s = job.weight, v.ideal, ctx.round_s

    u = rate_utility(utility, origin + penalty, remaining, weight, ideal)

    def u_kept(rate: float) -> float:
        # kept: no restart now, and one fewer later -- what a preemption would cost this job is
        # charged to the preemption (U(T) - U(T + penalty)), so one is only worth its restart
        t = origin + remaining / rate
        restart = restart_s if v.status.done_steps > 0 else 0.0
        return 2 * utility.value(t, weight, ideal) - utility.value(t + restart, weight, ideal)

    def hold(rate: float) -> float:
        return float(max(1, math.ceil(remaining / (rate * round_s)))) if hold_cost else 1.0

    move_min_rate = 0.0
    if keep is not None:
        kept_rate = ctx.throughput.rate(job, ctx.cluster.placement_from_matrix(keep), ctx.cluster)
        budget = (remaining / kept_rate if kept_rate > 0 else math.inf) - move_min_gain_s - penalty
        move_min_rate = remaining / budget if budget > 0 else math.inf
    return QueueEntry(
        key=job.job_id if key is None else key,
        request=v.request,
        class_key=ctx.throughput.rate_class(job) if class_key is None else class_key,
        utility=u,
        hold_rounds=hold if hold_cost else one_round,
        keep=keep,
        kept_utility=u_kept if keep is not None else None,
        move_min_rate=move_min_rate,
    )


def round_price_bounds(
    vals: Sequence[JobValuation], ctx: RoundContext, utility: Utility, eta: float
) -> PriceBounds:
    """Eq. 6-7 over the jobs known now (arrived and unfinished).

    Ideal duration on type k = N_j / X[j][k] (remaining steps / X[j][k] for utilities whose clock
    is "now"). The latest completion of job j is bounded by
    running every known job one after another on its slowest usable type from now on.
    """
    n_types = len(ctx.cluster.gpu_types)
    if not vals:
        return PriceBounds(np.ones(n_types), np.ones(n_types))
    rates = np.array([v.type_rates for v in vals]).reshape(len(vals), n_types)
    runnable = rates > 0
    slowest = np.array([v.type_rates[v.type_rates > 0].min(initial=np.inf) for v in vals])
    serial = float(
        np.sum(
            [
                v.status.remaining_steps / s
                for v, s in zip(vals, slowest, strict=True)
                if np.isfinite(s)
            ]
        )
    )
    ideal_u = np.zeros_like(rates)
    latest_u = np.zeros(len(vals))
    rounds = np.ones_like(rates)
    from_now = utility.clock == "now"
    for j, v in enumerate(vals):
        job = v.status.job
        steps = v.status.remaining_steps if from_now else job.total_steps
        for k in np.flatnonzero(runnable[j]):
            dur = steps / rates[j, k]
            ideal_u[j, k] = utility.value(dur, job.weight, v.ideal)
            rounds[j, k] = math.ceil(dur / ctx.round_s)
        latest_u[j] = utility.value(
            serial if from_now else ctx.now - job.arrival + serial, job.weight, v.ideal
        )
    w = np.array([v.status.job.num_gpus for v in vals])
    return price_bounds(ideal_u, latest_u, w, rounds, runnable, eta)


def single_node(v: JobValuation, cluster: Cluster) -> JobValuation:
    """Restrict a job to one-node placements when its gang fits on some node (multi-node
    candidates get rate 0 and are discarded by FIND_ALLOC)."""
    cons = v.request.rates_cons
    if not (np.where(cons > 0, cluster.capacity, 0).sum(axis=1) >= v.request.num_gpus).any():
        return v
    return replace(v, request=replace(v.request, rates_unc=np.zeros_like(v.request.rates_unc)))
