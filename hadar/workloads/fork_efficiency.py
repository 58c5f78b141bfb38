"""How much a job's forked copies are worth together (issue 23, point 6): HadarE's k copies of a
job, each at batch b, average their parameters once per round. Synchronous data parallelism at
the combined batch k*b is the best such averaging can do (averaging every step; HadarE averages
once per round, which the local-SGD literature finds no better and often worse), so their
progress is bounded by one job at batch k*b: each copy's progress counts at the efficiency of the
combined batch relative to its own (Pollux Eq. 6). It is an upper bound, not a measurement.

Efficiency data comes from Pollux's traces: a Pollux job's own application, or for a job of a
Gavel family (counted in steps at its own batch) the gradient noise scale of the Pollux
application that trains the same or a similar model (:data:`FAMILY_APPLICATION`), at the same
fraction of training. Jobs of other families have no efficiency data and are not bounded.
"""

from __future__ import annotations

from collections.abc import Sequence

from estimators.throughput import ThroughputModel
from goodput.traces import bundled_trace
from hadar.core.jobs import Job

FAMILY_APPLICATION = {
    "ResNet-18": ("cifar10", "same model and dataset (ResNet-18 on CIFAR-10)"),
    "ResNet-50": ("imagenet", "same model and dataset (ResNet-50 on ImageNet)"),
    "Recommendation": ("ncf", "same task (a MovieLens recommender)"),
    "Transformer": ("bert", "proxy: a Transformer trained with an Adam-family optimiser"),
    "LM": ("deepspeech2", "proxy: a recurrent sequence model trained with SGD"),
}
"""Gavel job family -> (Pollux application whose noise scale it borrows, how close the match
is). CycleGAN and A3C have none."""


def borrowed_noise_scale(job: Job, done: float) -> float | None:
    """The gradient noise scale (samples) a Gavel-family job borrows at progress ``done`` of its
    ``total_steps``: the mapped application's at the same fraction of its training."""
    match = FAMILY_APPLICATION.get(job.profile.family or "")
    if match is None or job.total_steps <= 0:
        return None
    trace = bundled_trace(match[0])
    fraction = min(max(done / job.total_steps, 0.0), 1.0)
    grad = trace.grad_stats(trace.init_batch_size, fraction * trace.target_progress)
    return grad.noise_scale(trace.init_batch_size)


def fork_factors(
    job: Job, batches: Sequence[int | None], done: float, throughput: ThroughputModel
) -> list[float] | None:
    """Per copy, the factor on its progress rate that the combined-batch bound allows (<= 1),
    given each copy's total batch (None: the job's own); None without efficiency data."""
    own = job.profile.batch_size
    sizes = [b if b is not None else own for b in batches]
    if any(b is None for b in sizes):
        return None
    per_copy = [int(b) for b in sizes if b is not None]
    combined = sum(per_copy)
    together = throughput.efficiency(job, combined, done)
    if together is not None:
        alone = {b: throughput.efficiency(job, b, done) for b in sorted(set(per_copy))}
        return [min(1.0, together / a) if (a := alone[b]) else 1.0 for b in per_copy]
    phi = borrowed_noise_scale(job, done)
    if phi is None:
        return None
    if phi == float("inf"):
        return [1.0] * len(per_copy)
    return [min(1.0, (phi + b) / (phi + combined)) for b in per_copy]


def largest_fork_factors(
    job: Job, copies: int, throughput: ThroughputModel, grid: int = 64
) -> list[float]:
    """Per copy count ``k`` = 1 .. ``copies``, the largest factor :func:`fork_factors` puts on
    each of ``k`` copies at the job's own batch, over its training (``grid`` + 1 evenly spaced
    points of its progress); 1 where the job has no efficiency data. An upper bound a lower
    bound on forked schedules may use (``hadar.experiments.bounds.discounted_fork_s``)."""
    out = [1.0]
    for k in range(2, copies + 1):
        best = 0.0
        for i in range(grid + 1):
            factors = fork_factors(job, [None] * k, job.total_steps * i / grid, throughput)
            best = max(best, 1.0 if factors is None else factors[0])
        out.append(best)
    return out[:copies]
