"""Elastic jobs in Hadar's round: each job whose GPU count and batch may vary is given, for the
round, the configuration (GPU type, GPU count, total batch) that the round's configuration LP
prices best, and the round then plans it as a rigid gang of that size (docs/elastic.md).

A job adapts when its throughput model knows its statistical efficiency (a goodput model, e.g.
Pollux's applications): its rate on a configuration is its goodput there at the batch that
maximises it. Other jobs, elastic or not, keep their own gang and batch.

The LP is the round's allocation LP (:mod:`primal_dual.lp_prices`) with one column per job and
configuration: ``max sum v x`` with each job on at most one configuration and each type's GPUs
shared. ``v`` is the job's utility at the configuration's rate, exactly as the DP values it (a
job that has made progress pays the restart penalty on any configuration but its running one),
under the policy's ``elastic_utility``: by default the ranked speed-up, the job's speed relative
to its best configuration times its rank among the round's jobs by remaining time
(:func:`longest_first_ranks`), heSRPT's structure for jobs with sub-linear speed-ups.
Each adapting job takes the configuration the LP's optimum gives it (in a basic optimum all
but at most one job per GPU type get one configuration whole; a split job takes its larger
share), which is one of largest payoff ``v - width x price`` at the LP's dual prices; a job the
LP leaves out takes its best payoff and waits unless the round finds room. A running job keeps
its configuration unless the move is worth it (:func:`_worth_moving`); where the LP had moved a
job that so stays, the LP is solved again without the staying jobs, over the GPUs they leave, and
the other running jobs' moves are judged again at its prices, until no more job stays (the first
LP's choices would count on GPUs a staying job holds, and could send a job where its own rule
would not move it). Rigid jobs bid with their own gang, so a GPU type the rigid queue needs is
priced for the elastic jobs too.

After the round is planned, each placed adapting job runs at the total batch of the largest
goodput on the GPUs it got, at its progress now (Pollux's batch choice for a given allocation).
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

import numpy as np

from estimators.iterations import IterationSample
from estimators.throughput import RunRate, ThroughputModel
from goodput.model import BATCH_CANDIDATES
from hadar.core.cluster import Cluster
from hadar.core.jobs import Job, JobStatus, Placement, as_gang
from hadar.policy import RoundContext, RoundPlan
from hadar.reference_rates import best_rate_per_type
from primal_dual.lp_prices import configuration_lp
from primal_dual.utility import RANKED_SPEEDUP, Utility

MAX_KEPT_BATCHES = 65_536
"""Knob: :func:`best_batch` answers kept between rounds before the memo starts afresh (one per job
kind, placement and epoch seen: bounded, so a long run on a large cluster does not grow it)."""


@dataclass(frozen=True)
class Configuration:
    """One way to run an adapting job this round: ``width`` GPUs of type ``gpu_type`` (an index
    into the cluster's types) at total batch ``batch``, progressing at ``rate``."""

    gpu_type: int
    width: int
    batch: int | None
    rate: float


Valued = tuple[Configuration, float, int]
"""A configuration, its utility to the job this round, and its column in the LP."""


@dataclass(frozen=True)
class ElasticRound:
    """The round as the rigid planner sees it, and each adapting job's chosen configuration."""

    ctx: RoundContext
    chosen: MappingProxyType[int, Configuration]
    batches: dict[Hashable, int | None] | None = None
    """:func:`best_batch`'s answers kept between rounds (:class:`ConfigurationMemo`), or None."""

    def finish(self, plan: RoundPlan, original: RoundContext) -> RoundPlan:
        """``plan`` with each placed adapting job's batch set for the GPUs it got."""
        if not self.chosen:
            return plan
        by_id = {s.job_id: s for s in original.jobs}
        out = []
        for a in plan.assignments:
            status = by_id.get(a.job_id)
            if status is not None and a.job_id in self.chosen:
                batch = best_batch(
                    status, a.placement, original.cluster, original.throughput, self.batches
                )
                a = replace(a, batch_size=batch)
            out.append(a)
        info = dict(plan.info, elastic_jobs=len(self.chosen))
        return RoundPlan(tuple(out), info)


def adapts(job: Job, throughput: ThroughputModel) -> bool:
    """Whether Hadar chooses the job's GPU count and batch each round: it is elastic and its
    throughput model knows its statistical efficiency."""
    if not job.is_elastic:
        return False
    return throughput.efficiency(job, own_batch(job) or 1) is not None


def own_batch(job: Job) -> int | None:
    """The job's own total batch (the one a rigid policy runs it at), if it declares one."""
    batch = job.spec.get("batch_size")
    if batch is not None:
        return int(batch)
    return None if job.batch_range is None else job.batch_range[0]


def batch_choices(job: Job) -> list[int | None]:
    """Total batches to try: a geometric grid of :data:`BATCH_CANDIDATES` over the job's batch
    range (as many as Pollux's batch search tries), and its own batch."""
    if job.batch_range is None:
        return [own_batch(job)]
    lo, hi = job.batch_range
    return list(_batch_grid(lo, hi, own_batch(job)))


@functools.lru_cache(maxsize=1024)
def _batch_grid(lo: int, hi: int, own: int | None) -> tuple[int, ...]:
    """:func:`batch_choices` of a batch range and own batch (asked again for every placement a
    round sizes a batch for: remembered)."""
    grid: set[int] = {lo, hi}
    if hi > lo:
        ratio = (hi / lo) ** (1.0 / (BATCH_CANDIDATES - 1))
        grid |= {int(round(lo * ratio**i)) for i in range(1, BATCH_CANDIDATES - 1)}
    if own is not None and lo <= own <= hi:
        grid.add(own)
    return tuple(sorted(grid))


def widths(job: Job, cluster: Cluster) -> list[int]:
    """GPU counts to try: powers of two within the job's range, whole nodes of each GPU type
    (as Sia's configurations), its fewest and its own count, up to the most GPUs one type has."""
    lo, hi = job.gpu_range
    per_type = cluster.capacity.sum(axis=0)
    hi = min(hi, int(per_type.max(initial=0)))
    out = {w for w in (lo, job.num_gpus) if w <= hi}
    w = 1
    while w <= hi:
        out.add(w)
        w *= 2
    for k in range(cluster.capacity.shape[1]):
        node = int(cluster.capacity[:, k].max(initial=0))
        if node > 0:
            out |= set(range(node, min(hi, int(per_type[k])) + 1, node))
    return sorted(w for w in out if lo <= w <= hi)


def configurations(job: Job, cluster: Cluster, throughput: ThroughputModel) -> list[Configuration]:
    """Every (type, width) the job can run on, each at its best batch (rate > 0 only)."""
    cap = cluster.capacity
    best: dict[tuple[int, int], Configuration] = {}
    batches = batch_choices(job)
    for w in widths(job, cluster):
        cons, unc = throughput.gang_rates(job, w, batches, cluster)
        rates = best_rate_per_type(cons, unc, cap, w)  # [batch, type]
        firsts = np.argmax(rates, axis=0)  # the first batch of the type's best rate
        for k, i in enumerate(firsts):
            rate = float(rates[i, k])
            if rate > 0:
                best[(k, w)] = Configuration(k, w, batches[i], rate)
    return [best[key] for key in sorted(best)]


def running_configuration(placement: Placement | None, cluster: Cluster) -> tuple[int, int] | None:
    """(type index, GPU count) of a placement on one GPU type; None otherwise."""
    if not placement:
        return None
    types = {t for per in placement.values() for t, c in per.items() if c > 0}
    if len(types) != 1:
        return None
    k = cluster.type_index.get(next(iter(types)))
    if k is None:
        return None
    return k, sum(sum(per.values()) for per in placement.values())


def job_utility(
    status: JobStatus,
    ctx: RoundContext,
    utility: Utility,
    ideal: float,
    weight: float | None = None,
) -> tuple[Callable[[float], float], Callable[[float], float]]:
    """The job's utility of a rate on a new placement and on its running one, as the DP values
    them (:func:`hadar.valuation.queue_entry`)."""
    job = status.job
    remaining = status.remaining_steps
    restart = job.restart_cost_s(ctx.restart_penalty_s) if status.done_steps > 0 else 0.0
    origin = ctx.now - job.arrival if utility.clock == "arrival" else 0.0
    w = job.weight if weight is None else weight

    def moved(rate: float) -> float:
        return utility.value(origin + restart + remaining / rate, w, ideal)

    def kept(rate: float) -> float:
        t = origin + remaining / rate
        return 2 * utility.value(t, w, ideal) - utility.value(t + restart, w, ideal)

    return moved, kept


def longest_first_ranks(remaining_s: Sequence[float]) -> list[int]:
    """Each job's rank by its remaining time: 1 + the number of jobs with more left (the
    longest 1, the shortest the most; equal times share a rank)."""
    ordered = sorted(remaining_s)
    return [1 + len(ordered) - bisect.bisect_right(ordered, t) for t in remaining_s]


class ConfigurationMemo:
    """Each kind of adapting job's configurations (:func:`configurations`), kept from round to
    round while the cluster and the throughput model are the same and the model does not learn
    (the simulator): they depend on the job's kind (:func:`configuration_key`), not on its
    progress. Recomputed every round, they were a third of a Hadar simulation's CPU on
    ``pollux-hetero-64``."""

    def __init__(self) -> None:
        self._key: tuple[object, ...] | None = None
        self._throughput: ThroughputModel | None = None
        self._known: dict[Hashable, list[Configuration]] = {}
        self._batches: dict[Hashable, int | None] = {}

    def for_round(self, ctx: RoundContext) -> dict[Hashable, list[Configuration]]:
        """The configurations known for ``ctx``'s cluster and model: none when either changed,
        and a fresh dict every round for a model that learns."""
        cluster = ctx.cluster
        key = (cluster.nodes, cluster.network, cluster.gpu_types)
        if ctx.throughput.learns:
            return {}
        if ctx.throughput is not self._throughput or key != self._key:
            self._key, self._throughput, self._known = key, ctx.throughput, {}
            self._batches = {}
        return self._known

    def batches_for_round(self, ctx: RoundContext) -> dict[Hashable, int | None] | None:
        """:func:`best_batch`'s answers known for ``ctx`` (after :meth:`for_round`): None for a
        model that learns."""
        return None if ctx.throughput.learns else self._batches


def configuration_key(job: Job) -> Hashable:
    """What a job's configurations depend on: its kind, GPU and batch ranges, own batch and own
    GPU count (one of its widths, :func:`widths`)."""
    return (job.job_type, job.gpu_range, job.batch_range, own_batch(job), job.num_gpus)


def elastic_round(
    ctx: RoundContext,
    utility: Utility,
    min_gain_s: float,
    memo: ConfigurationMemo | None = None,
) -> ElasticRound:
    """Each adapting job's configuration for the round and the round's rigid view (the input
    unchanged when no job adapts). A running job changes configuration only as the DP moves a
    kept job (:func:`_worth_moving`). ``memo`` keeps the configurations between rounds."""
    cluster = ctx.cluster
    adapting = [s for s in ctx.jobs if adapts(s.job, ctx.throughput)]
    if not adapting or cluster.capacity.size == 0:
        return ElasticRound(ctx, MappingProxyType({}))
    cap = cluster.capacity
    adapting_ids = {s.job_id for s in adapting}
    running: dict[int, tuple[int, int] | None] = {
        s.job_id: running_configuration(ctx.current.get((s.job_id, 0)), cluster) for s in ctx.jobs
    }
    cols_job: list[int] = []
    cols_job_ids: list[int] = []
    cols_type: list[int] = []
    cols_width: list[int] = []
    cols_value: list[float] = []
    options: dict[int, list[Valued]] = {}
    known = {} if memo is None else memo.for_round(ctx)
    per_job: list[tuple[list[Configuration], float]] = []
    for s in ctx.jobs:
        job = s.job
        if s.job_id in adapting_ids:
            key = configuration_key(job)
            configs = known.get(key)
            if configs is None:
                configs = known[key] = configurations(job, cluster, ctx.throughput)
        else:
            cons, unc = ctx.throughput.cell_rates(job, cluster)
            rates = best_rate_per_type(cons, unc, cap, job.num_gpus)
            configs = [
                Configuration(int(k), job.num_gpus, None, float(rates[k]))
                for k in np.flatnonzero(rates > 0)
            ]
        best_rate = max((c.rate for c in configs), default=0.0)
        per_job.append((configs, best_rate))
    ranked = utility.name == RANKED_SPEEDUP
    left_s = [
        s.remaining_steps / best if best > 0 else math.inf
        for s, (_, best) in zip(ctx.jobs, per_job, strict=True)
    ]
    ranks = longest_first_ranks(left_s) if ranked else []
    for j, s in enumerate(ctx.jobs):
        job = s.job
        configs, best_rate = per_job[j]
        if ranked:
            moved, kept = job_utility(s, ctx, utility, left_s[j], job.weight * ranks[j])
        else:
            ideal = job.total_steps / best_rate if best_rate > 0 else math.inf
            moved, kept = job_utility(s, ctx, utility, ideal)
        valued = []
        for c in configs:
            value = kept(c.rate) if running[s.job_id] == (c.gpu_type, c.width) else moved(c.rate)
            valued.append((c, value, len(cols_value)))
            cols_job_ids.append(s.job_id)
            cols_job.append(j)
            cols_type.append(c.gpu_type)
            cols_width.append(c.width)
            cols_value.append(value)
        if s.job_id in adapting_ids:
            options[s.job_id] = valued
    columns = (
        np.array(cols_job),
        np.array(cols_type),
        np.array(cols_width, dtype=float),
        np.array(cols_value),
    )
    prices, shares = configuration_lp(*columns, cap.sum(axis=0))
    chosen: dict[int, Configuration] = {}
    rank: dict[int, tuple[float, ...]] = {}

    def payoff(cv: Valued) -> float:
        return cv[1] - cv[0].width * float(prices[cv[0].gpu_type])

    # each running job's own configuration, where it is one of its options
    kept_options = {
        s.job_id: cv
        for s in adapting
        for cv in options[s.job_id]
        if (cv[0].gpu_type, cv[0].width) == running[s.job_id]
    }
    staying: dict[int, Valued] = {}
    while True:
        added = False
        for s in adapting:
            stay = kept_options.get(s.job_id)
            if stay is None or s.job_id in staying:
                continue
            valued = options[s.job_id]
            best = max(valued, key=lambda cv: (shares[cv[2]], payoff(cv), -cv[0].width))
            if not _worth_moving(s, stay, best, payoff, ctx, min_gain_s):
                staying[s.job_id] = stay
                added = True
        if not added or all(shares[cv[2]] >= 1.0 - 1e-9 for cv in staying.values()):
            break
        # the LP moved jobs that stay: share out the GPUs they leave among the others, and
        # judge the others' moves again at the prices of that LP
        prices, shares = _without_staying(columns, cols_job_ids, staying, cap.sum(axis=0))
    for s in adapting:
        valued = options[s.job_id]
        if not valued:
            continue
        stays = s.job_id in staying
        # the LP's own configuration for the job (its largest share; one of its best payoffs),
        # else, for a job the LP leaves out, its best payoff
        best = (
            staying[s.job_id]
            if stays
            else max(valued, key=lambda cv: (shares[cv[2]], payoff(cv), -cv[0].width))
        )
        chosen[s.job_id] = best[0]
        # jobs staying where they run first (their GPUs are theirs), then by the LP's share
        rank[s.job_id] = (0.0 if stays else 1.0, -float(shares[best[2]]), -payoff(best))
    # the GPUs the LP gives the jobs that do not adapt are theirs
    rigid = np.array([j not in options for j in cols_job_ids], dtype=bool)
    left = cap.sum(axis=0).astype(float) - np.bincount(
        columns[1][rigid], weights=(shares * columns[2])[rigid], minlength=cap.shape[1]
    )
    order = sorted(chosen, key=lambda j: (*rank[j], j))
    _fit(chosen, order, options, payoff, left)
    batches = None if memo is None else memo.batches_for_round(ctx)
    return ElasticRound(_rigid_view(ctx, chosen), MappingProxyType(chosen), batches)


def _without_staying(
    columns: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    column_jobs: list[int],
    staying: dict[int, Valued],
    capacity: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The configuration LP without the columns of the ``staying`` jobs (job id -> the
    configuration it keeps), over the GPUs of each type they leave: its prices and each column's
    share (0 for the staying jobs' columns)."""
    keep = np.array([j not in staying for j in column_jobs], dtype=bool)
    held = np.bincount(
        [cv[0].gpu_type for cv in staying.values()],
        weights=[cv[0].width for cv in staying.values()],
        minlength=len(capacity),
    )
    job, gpu_type, width, value = (c[keep] for c in columns)
    prices, kept_shares = configuration_lp(
        job, gpu_type, width, value, np.maximum(capacity - held, 0.0)
    )
    shares = np.zeros(len(keep))
    shares[keep] = kept_shares
    return prices, shares


def _fit(
    chosen: dict[int, Configuration],
    order: list[int],
    options: dict[int, list[Valued]],
    payoff: Callable[[Valued], float],
    left: np.ndarray,
) -> None:
    """Make the chosen configurations fit the GPUs of each type together, in ``order``: a job
    whose configuration no longer fits takes the most valuable of the narrower ones that do
    (none: it keeps it and waits). The LP's shares may split a job between configurations, and
    the hysteresis keeps running jobs where the LP would have moved them; without this a gang
    could be sized for GPUs that another job keeps, and wait while they idle. Mutates ``chosen``
    and ``left``."""
    for j in order:
        c = chosen[j]
        if c.width > left[c.gpu_type] + 1e-9:
            fitting = [
                cv for cv in options[j] if cv[0].width <= min(c.width, left[cv[0].gpu_type] + 1e-9)
            ]
            if not fitting:
                continue
            c = chosen[j] = max(fitting, key=lambda cv: (cv[1], payoff(cv), -cv[0].width))[0]
        left[c.gpu_type] -= c.width


def _worth_moving(
    status: JobStatus,
    kept: Valued,
    best: Valued,
    payoff: Callable[[Valued], float],
    ctx: RoundContext,
    min_gain_s: float,
) -> bool:
    """Whether a running job leaves its configuration for ``best``: when ``best`` pays more and
    finishes it ``min_gain_s`` sooner, restart included (the DP's rule for moving a kept job), or
    when the prices leave its running one no payoff and ``best`` is narrower (it gives back GPUs
    that are worth more to others)."""
    if best is kept or payoff(best) <= payoff(kept):
        return False
    restart = status.job.restart_cost_s(ctx.restart_penalty_s) if status.done_steps > 0 else 0.0
    remaining = status.remaining_steps
    if remaining / best[0].rate + restart <= remaining / kept[0].rate - min_gain_s:
        return True
    return payoff(kept) < 0 and best[0].width < kept[0].width


def _rigid_view(ctx: RoundContext, chosen: dict[int, Configuration]) -> RoundContext:
    """``ctx`` with each adapting job a rigid gang of its chosen width and batch that runs on its
    chosen GPU type only; a running placement of another configuration is left out (the job
    moves, and pays its restart)."""
    jobs: list[JobStatus] = []
    for s in ctx.jobs:
        c = chosen.get(s.job_id)
        jobs.append(s if c is None else replace(s, job=as_gang(s.job, c.width, c.batch)))
    current = {
        key: p
        for key, p in ctx.current.items()
        if key[0] not in chosen
        or running_configuration(p, ctx.cluster) == (chosen[key[0]].gpu_type, chosen[key[0]].width)
    }
    pinned = {j: c.gpu_type for j, c in chosen.items()}
    return replace(
        ctx, jobs=tuple(jobs), current=current, throughput=PinnedTypes(ctx.throughput, pinned)
    )


class PinnedTypes(ThroughputModel):
    """``inner`` with each pinned job able to run on its one GPU type only (rate 0 elsewhere)."""

    def __init__(self, inner: ThroughputModel, pinned: dict[int, int]) -> None:
        self.inner = inner
        self.pinned = pinned

    def rate_class(self, job: Job) -> Hashable:
        return (self.inner.rate_class(job), self.pinned.get(job.job_id))

    def _mask(self, job: Job, rates: np.ndarray) -> np.ndarray:
        k = self.pinned.get(job.job_id)
        if k is None:
            return rates
        out = np.zeros_like(rates)
        out[:, k] = rates[:, k]
        return out

    def cell_rates(self, job: Job, cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
        cons, unc = self.inner.cell_rates(job, cluster)
        return self._mask(job, cons), self._mask(job, unc)

    def multi_node_rates(self, job: Job, cluster: Cluster, bandwidth_gbps: float) -> np.ndarray:
        return self._mask(job, self.inner.multi_node_rates(job, cluster, bandwidth_gbps))

    def _off_type(self, job: Job, placement: Placement, cluster: Cluster) -> bool:
        k = self.pinned.get(job.job_id)
        if k is None:
            return False
        used = {t for per in placement.values() for t, c in per.items() if c > 0}
        return used != {cluster.gpu_types[k]}

    def rate(self, job: Job, placement: Placement, cluster: Cluster) -> float:
        return (
            0.0
            if self._off_type(job, placement, cluster)
            else self.inner.rate(job, placement, cluster)
        )

    def run_rate(
        self,
        job: Job,
        placement: Placement,
        cluster: Cluster,
        done: float = 0.0,
        batch_size: int | None = None,
    ) -> RunRate:
        if self._off_type(job, placement, cluster):
            return RunRate(0.0)
        return self.inner.run_rate(job, placement, cluster, done, batch_size)

    def run_rates(
        self,
        job: Job,
        placement: Placement,
        cluster: Cluster,
        done: float,
        batches: Sequence[int | None],
    ) -> list[RunRate]:
        if self._off_type(job, placement, cluster):
            return [RunRate(0.0)] * len(batches)
        return self.inner.run_rates(job, placement, cluster, done, batches)

    def efficiency(self, job: Job, batch_size: int, done: float = 0.0) -> float | None:
        return self.inner.efficiency(job, batch_size, done)

    def progress_class(self, job: Job, done: float) -> Hashable:
        return self.inner.progress_class(job, done)

    def describe(self, job: Job, cluster: Cluster) -> str:
        return self.inner.describe(job, cluster)

    def iterations(self, job: Job) -> tuple[IterationSample, ...]:
        return self.inner.iterations(job)


def best_batch(
    status: JobStatus,
    placement: Placement,
    cluster: Cluster,
    throughput: ThroughputModel,
    known: dict[Hashable, int | None] | None = None,
) -> int | None:
    """The total batch of the largest goodput on ``placement`` at the job's progress now;
    ``known`` keeps the answers by job kind, :meth:`ThroughputModel.placement_class` and
    :meth:`ThroughputModel.progress_class` (for a model that does not learn)."""
    job = status.job
    choices = batch_choices(job)
    if len(choices) == 1:
        return choices[0]
    done = status.done_steps
    key: Hashable = None
    if known is not None:
        where = throughput.placement_class(job, placement)
        key = (configuration_key(job), where, throughput.progress_class(job, done))
        if key in known:
            return known[key]
    rates = [r.rate for r in throughput.run_rates(job, placement, cluster, done, choices)]
    batch = choices[int(np.argmax(rates))]
    if known is not None:
        if len(known) >= MAX_KEPT_BATCHES:
            known.clear()  # exact answers only: starting afresh changes no decision
        known[key] = batch
    return batch


__all__: Sequence[str] = (
    "Configuration",
    "ElasticRound",
    "adapts",
    "best_batch",
    "configurations",
    "elastic_round",
    "PinnedTypes",
)
