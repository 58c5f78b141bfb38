"""The throughput model of Pollux's applications: goodput from the measured traces.

A job whose type is one of Pollux's applications progresses in samples at its initial batch
size M0; its rate on a placement is its goodput there (throughput x statistical efficiency,
``goodput.traces``), at the round's batch size and at its progress so far. Other jobs go to the
fallback model (Gavel's table or the composite estimate).

Policies see :meth:`cell_rates`: per GPU type, the gang at the job's own batch on one node
(consolidated) and spread over nodes (unconsolidated), at its *average* efficiency over training
(total progress / sum over epochs of progress / efficiency: the rate that finishes the job in the
same time as the varying one). The simulator asks :meth:`run_rate`, which uses the efficiency at
the job's current progress and the real placement.

The traces were measured on T4s. On another GPU type the compute part of an iteration is scaled
by the T4's speed relative to it for that application (:mod:`hadar.workloads.gpu_scaling`:
Gavel's measured ratios where its table has the type), and the figures are reported as
estimated.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence

import numpy as np

from estimators.throughput import EstimatedCell, RunRate, ThroughputModel
from goodput.applications import APPLICATIONS
from goodput.model import GradParams, statistical_efficiency
from goodput.traces import AppTrace, TraceRate, bundled_trace
from hadar.core.cluster import Cluster
from hadar.core.jobs import Job, Placement
from hadar.workloads.gpu_scaling import MEASURED_GPU, compute_scale

NODE_GPUS = 4
"""GPUs per node of the measured testbed: how an unconsolidated gang is spread."""
MAX_KEPT_RUN_RATES = 262_144
"""At most this many rates kept by :class:`PolluxThroughput` (exact answers: starting afresh
changes no figure)."""


def is_pollux_job(job: Job) -> bool:
    """Whether the job replays one of Pollux's applications (its spec names it: a job type
    alone, e.g. a user's ``cifar10`` in a Gavel-schema table, does not)."""
    return job.spec.get("application") in APPLICATIONS


def job_batch_size(job: Job, trace: AppTrace) -> int:
    """The job's own total batch size (its workload's tuned one), else M0."""
    batch = job.spec.get("batch_size")
    return int(batch) if batch is not None else trace.init_batch_size


def spread(num_gpus: int) -> tuple[int, ...]:
    """An unconsolidated gang: ``num_gpus`` over max(2, ceil(W / 4)) nodes, as evenly as
    possible (one GPU cannot be spread)."""
    if num_gpus <= 1:
        return (num_gpus,)
    nodes = max(2, math.ceil(num_gpus / NODE_GPUS))
    base, extra = divmod(num_gpus, nodes)
    return tuple(base + (1 if i < extra else 0) for i in range(nodes) if base or i < extra)


def scaled(rate: TraceRate, sync_s: float, factor: float) -> TraceRate:
    """``rate`` with each pass's compute time scaled by ``factor`` (the sync time kept)."""
    if factor == 1.0:
        return rate
    step = scaled_step_time(rate.step_time, sync_s, rate.accum_steps + 1, factor)
    return TraceRate(
        step,
        rate.local_bsz,
        rate.accum_steps,
        rate.batch_size,
        rate.batch_size / step,
        rate.efficiency,
    )


def step_on(step_s: float, sync_s: float, accum: int, factor: float) -> float:
    """An iteration's time (``accum`` accumulation passes and one synchronising pass taking
    ``step_s``) with its compute scaled by ``factor``; unchanged at factor 1."""
    return step_s if factor == 1.0 else scaled_step_time(step_s, sync_s, accum + 1, factor)


def scaled_step_time(step_s: float, sync_s: float, passes: int, factor: float) -> float:
    """An iteration of ``passes`` passes taking ``step_s`` with its compute time scaled by
    ``factor`` (the sync time ``sync_s`` kept)."""
    compute = (step_s - sync_s) / passes
    return passes * compute * factor + sync_s


def iteration_on(
    application: str, per_node: tuple[int, ...], gpu_type: str, local_bsz: float
) -> tuple[float, float]:
    """(step time, sync time) in seconds of one pass of ``application`` on ``per_node`` GPUs of
    ``gpu_type`` per node at local batch ``local_bsz``: the trace's, its compute part scaled to
    the type (what a job's workers would measure there)."""
    trace = bundled_trace(application)
    step, sync = trace.iteration_time(per_node, local_bsz)
    factor = compute_scale(gpu_type, application)[0]
    return (step - sync) * factor + sync, sync


class PolluxThroughput(ThroughputModel):
    """Goodput of Pollux's applications from the traces; other jobs from ``fallback``."""

    def __init__(self, fallback: ThroughputModel) -> None:
        self.fallback = fallback
        self._cells: dict[
            tuple[str, int, int, tuple[str, ...], tuple[int, ...]], tuple[np.ndarray, np.ndarray]
        ] = {}
        self._gangs: dict[tuple[str, int, int, tuple[str, ...]], tuple[np.ndarray, np.ndarray]] = {}
        """:meth:`_gang_rows` by (application, GPU count, total batch, GPU types)."""
        self._efficiency: dict[tuple[str, int], float] = {}
        """:meth:`average_efficiency` by (application, total batch): every GPU count of a job
        at one batch asks for the same figure (a job's configurations: its batch grid x its counts)."""
        self._scales: dict[tuple[str, str], tuple[float, bool]] = {}
        """:meth:`_scale` by (GPU type, application)."""
        self._run_rates: dict[tuple[str, tuple[int, ...], tuple[str, ...], int, int], RunRate] = {}
        """:meth:`run_rate` of Pollux jobs by (application, GPUs per node sorted, GPU types,
        total batch, epoch): it reads nothing else (a batch search asks for the same rates
        every round); emptied at :data:`MAX_KEPT_RUN_RATES` entries."""
        self._speeds: dict[
            tuple[str, tuple[int, ...], tuple[str, ...], int], tuple[TraceRate, bool]
        ] = {}
        """:meth:`_speed` by (application, GPUs per node sorted, GPU types, total batch): the
        part of a rate that does not change with the epoch; likewise bounded."""
        self._epoch_efficiency: dict[tuple[str, int, int], float] = {}
        """Statistical efficiency by (application, total batch, epoch); likewise bounded."""

    def _scale(self, gpu_type: str, application: str) -> tuple[float, bool]:
        """:func:`compute_scale`, once per GPU type and application in this model (every rate
        of every configuration asks for it)."""
        key = (gpu_type, application)
        hit = self._scales.get(key)
        if hit is None:
            hit = self._scales[key] = compute_scale(gpu_type, application)
        return hit

    def _on_type(
        self,
        trace: AppTrace,
        per_node: tuple[int, ...],
        rate: TraceRate,
        gpu_type: str,
        sync: float | None = None,
    ) -> tuple[TraceRate, bool]:
        """``rate`` (the trace's, on its own GPU type) on ``gpu_type``, and whether that type's
        compute scale is estimated; ``sync``: the placement's synchronisation time at the rate's
        local batch, where the caller has it."""
        factor, estimated = self._scale(gpu_type, trace.name)
        if factor != 1.0:
            if sync is None:
                _, sync = trace.iteration_time(per_node, rate.local_bsz)
            rate = scaled(rate, sync, factor)
        return rate, estimated

    def run_rate(
        self,
        job: Job,
        placement: Placement,
        cluster: Cluster,
        done: float = 0.0,
        batch_size: int | None = None,
    ) -> RunRate:
        if not is_pollux_job(job):
            return self.fallback.run_rate(job, placement, cluster, done, batch_size)
        return self._pollux_rates(job, placement, done, (batch_size,))[0]

    def run_rates(
        self,
        job: Job,
        placement: Placement,
        cluster: Cluster,
        done: float,
        batches: Sequence[int | None],
    ) -> list[RunRate]:
        if not is_pollux_job(job):
            return self.fallback.run_rates(job, placement, cluster, done, batches)
        return self._pollux_rates(job, placement, done, batches)

    def _pollux_rates(
        self, job: Job, placement: Placement, done: float, batches: Sequence[int | None]
    ) -> list[RunRate]:
        """:meth:`run_rate` of a Pollux job at each of ``batches`` (None: the job's own)."""
        per_node = tuple(sum(per.values()) for per in placement.values() if sum(per.values()) > 0)
        if not per_node:
            return [RunRate(0.0)] * len(batches)
        types = {t for per in placement.values() for t, c in per.items() if c > 0}
        trace = bundled_trace(job.job_type)
        progress = done / trace.init_batch_size
        where = (job.job_type, tuple(sorted(per_node)), tuple(sorted(types)))
        epoch = trace.epoch_of(progress)
        kept = self._run_rates
        out = []
        for batch_size in batches:
            batch = batch_size if batch_size is not None else job_batch_size(job, trace)
            key = (*where, batch, epoch)
            hit = kept.get(key)
            if hit is None:
                if len(kept) >= MAX_KEPT_RUN_RATES:
                    kept.clear()
                hit = kept[key] = self._trace_run_rate(trace, per_node, types, batch, progress)
            out.append(hit)
        return out

    def _trace_run_rate(
        self,
        trace: AppTrace,
        per_node: tuple[int, ...],
        types: set[str],
        batch: int,
        progress: float,
    ) -> RunRate:
        """:meth:`run_rate` from the trace: ``batch`` on ``per_node`` GPUs of ``types``,
        ``progress`` iterations at M0 in (its speed there, whatever the progress, times the
        statistical efficiency during the progress's epoch)."""
        speed_key = (trace.name, tuple(sorted(per_node)), tuple(sorted(types)), batch)
        speed = self._speeds.get(speed_key)
        if speed is None:
            if len(self._speeds) >= MAX_KEPT_RUN_RATES:
                self._speeds.clear()
            speed = self._speeds[speed_key] = self._speed(trace, per_node, types, batch)
        rate, estimated = speed
        eff = self._efficiency_in_epoch(trace, rate.batch_size, progress)
        return RunRate(
            rate.throughput * eff, rate.batch_size, rate.throughput, eff, estimated=estimated
        )

    def _speed(
        self, trace: AppTrace, per_node: tuple[int, ...], types: set[str], batch: int
    ) -> tuple[TraceRate, bool]:
        """The trace's rate at total ``batch`` on ``per_node`` GPUs of ``types`` (its efficiency
        left at 1) and whether a type's compute scale is estimated: the slowest GPU type of the
        placement sets the pace (synchronous data parallelism)."""
        total, local, accum, total_batch, _ = trace.pace(per_node, batch)
        own = TraceRate(total, local, accum, total_batch, total_batch / total, 1.0)
        worst: tuple[TraceRate, bool] | None = None
        for gtype in sorted(types):
            rate, est = self._on_type(trace, per_node, own, gtype)
            if worst is None or rate.throughput < worst[0].throughput:
                worst = (rate, est)
        assert worst is not None
        return worst

    def efficiency(self, job: Job, batch_size: int, done: float = 0.0) -> float | None:
        if not is_pollux_job(job):
            return self.fallback.efficiency(job, batch_size, done)
        trace = bundled_trace(job.job_type)
        return self._efficiency_in_epoch(trace, batch_size, done / trace.init_batch_size)

    def _efficiency_in_epoch(self, trace: AppTrace, batch_size: int, progress: float) -> float:
        """The statistical efficiency of ``batch_size`` at ``progress`` (iterations at M0): the
        gradient statistics are the epoch's, so it is kept by the epoch."""
        key = (trace.name, batch_size, trace.epoch_of(progress))
        eff = self._epoch_efficiency.get(key)
        if eff is None:
            grad = trace.grad_stats(batch_size, progress)
            eff = float(statistical_efficiency(grad, trace.init_batch_size, batch_size))
            if len(self._epoch_efficiency) >= MAX_KEPT_RUN_RATES:
                self._epoch_efficiency.clear()
            self._epoch_efficiency[key] = eff
        return eff

    def progress_class(self, job: Job, done: float) -> Hashable:
        """For a Pollux job, its epoch: the trace's gradient statistics, hence its rates, change
        only from one epoch to the next."""
        if not is_pollux_job(job):
            return self.fallback.progress_class(job, done)
        trace = bundled_trace(job.job_type)
        return ("epoch", trace.epoch_of(done / trace.init_batch_size))

    def placement_class(self, job: Job, placement: Placement) -> Hashable:
        """For a Pollux job, its GPUs per node (in any order) and the set of their types:
        :meth:`run_rate` reads nothing else of a placement."""
        if not is_pollux_job(job):
            return self.fallback.placement_class(job, placement)
        counts = sorted(n for per in placement.values() if (n := sum(per.values())) > 0)
        types = sorted({t for per in placement.values() for t, c in per.items() if c > 0})
        return ("gpus-per-node", tuple(counts), tuple(types))

    def rate(self, job: Job, placement: Placement, cluster: Cluster) -> float:
        if not is_pollux_job(job):
            return self.fallback.rate(job, placement, cluster)
        return self.run_rate(job, placement, cluster).rate

    def average_efficiency(self, trace: AppTrace, batch: int) -> float:
        """Total progress / sum over epochs of (epoch progress / efficiency) at total ``batch``."""
        key = (trace.name, batch)
        hit = self._efficiency.get(key)
        if hit is None:
            hit = self._efficiency[key] = self._average_efficiency(trace, batch)
        return hit

    def _average_efficiency(self, trace: AppTrace, batch: int) -> float:
        bounds = trace.epoch_progress
        lengths = np.diff(np.concatenate([[0.0], bounds]))
        starts = np.concatenate([[0.0], bounds[:-1]])
        # each epoch's statistics at once (AppTrace.epoch_of of every epoch's start)
        epochs = np.minimum(np.searchsorted(bounds, starts, side="right"), len(bounds) - 1)
        sqr, var = trace.epoch_grad_arrays(batch)
        grad = GradParams(sqr[epochs], var[epochs])  # type: ignore[arg-type]  # arrays
        effs = statistical_efficiency(grad, trace.init_batch_size, float(batch))
        return float(bounds[-1] / np.sum(lengths / np.maximum(effs, 1e-9)))

    def rate_class(self, job: Job) -> Hashable:
        """The fallback's class, or (application, gang, total batch): a Pollux job's rates
        depend on its batch."""
        if not is_pollux_job(job):
            return self.fallback.rate_class(job)
        return (job.job_type, job.num_gpus, job_batch_size(job, bundled_trace(job.job_type)))

    def cell_rates(self, job: Job, cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
        if not is_pollux_job(job):
            return self.fallback.cell_rates(job, cluster)
        trace = bundled_trace(job.job_type)
        batch = job_batch_size(job, trace)
        key = (job.job_type, job.num_gpus, batch, cluster.gpu_types, cluster.capacity.shape)
        hit = self._cells.get(key)
        if hit is None:
            rows = self._gang_rows(trace, job.num_gpus, [batch], cluster.gpu_types)[0]
            cons, unc = (np.broadcast_to(a, cluster.capacity.shape) for a in rows)
            hit = self._cells[key] = (cons, unc)
        return hit[0], hit[1]

    def gang_rates(
        self, job: Job, width: int, batches: Sequence[int | None], cluster: Cluster
    ) -> tuple[np.ndarray, np.ndarray]:
        if not is_pollux_job(job):
            return super().gang_rates(job, width, batches, cluster)
        trace = bundled_trace(job.job_type)
        own = job_batch_size(job, trace)
        totals = [own if b is None else int(b) for b in batches]
        rows = self._gang_rows(trace, width, totals, cluster.gpu_types)
        shape = (len(rows), *cluster.capacity.shape)
        cons, unc = (np.array(side)[:, None, :] for side in zip(*rows, strict=True))
        return np.broadcast_to(cons, shape), np.broadcast_to(unc, shape)

    def _gang_rows(
        self, trace: AppTrace, width: int, batches: Sequence[int], gpu_types: tuple[str, ...]
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per total batch of ``batches``, a ``width``-GPU gang's goodput on each GPU type (at
        the training's average efficiency), consolidated on one node and spread
        (:func:`spread`): the same on every node of a type."""
        keys = [(trace.name, width, b, gpu_types) for b in batches]
        todo = list(
            dict.fromkeys(b for b, key in zip(batches, keys, strict=True) if key not in self._gangs)
        )
        if todo:
            factors = [self._scale(gtype, trace.name)[0] for gtype in gpu_types]
            # the same on every type before scaling (as :meth:`_on_type` scales a rate)
            sides = [trace.paces(per_node, todo) for per_node in ((width,), spread(width))]
            for i, batch in enumerate(todo):
                eff = self.average_efficiency(trace, batch)
                rows = []
                for paces in sides:
                    step, _, accum, total_batch, sync = paces[i]
                    row = [
                        total_batch / step_on(step, sync, accum, factor) * eff for factor in factors
                    ]
                    rows.append(np.array(row))
                self._gangs[(trace.name, width, batch, gpu_types)] = (rows[0], rows[1])
        return [self._gangs[key] for key in keys]

    def describe(self, job: Job, cluster: Cluster) -> str:
        if not is_pollux_job(job):
            return self.fallback.describe(job, cluster)
        return "Pollux traces (goodput, samples at M0 per second)"

    def estimated_cells(self, jobs: Iterable[Job], cluster: Cluster) -> list[EstimatedCell]:
        jobs = list(jobs)
        out = set(self.fallback.estimated_cells([j for j in jobs if not is_pollux_job(j)], cluster))
        for job in jobs:
            if not is_pollux_job(job):
                continue
            for gtype in cluster.gpu_types:
                if gtype != MEASURED_GPU and compute_scale(gtype, job.job_type)[1]:
                    for where in ("consolidated", "multi-node"):
                        out.add(EstimatedCell(job.job_type, gtype, job.num_gpus, where))
        return sorted(out)

    def reference_job_types(self) -> list[tuple[str, int]]:
        return self.fallback.reference_job_types()
