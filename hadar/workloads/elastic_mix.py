"""Real-run workloads of small *elastic* training jobs: ``elastic-2`` ... ``elastic-4``.

Each job trains one of the tiny (or small) physical models for real, may run on
``min_gpus``-``max_gpus`` GPUs (the local provider emulates them: one worker process per GPU,
joined with gloo on a CPU) and at any total batch size in ``batch_range``; jobs arrive
staggered, so an elastic policy (``afs``, ``pollux``) has to shrink a running job when the next
one arrives and grow it again when one finishes (docs/worker.md, "Elastic rounds"). The spec's
``batch_size`` is the job's initial *total* batch M0 (the batch at one GPU); a round at W GPUs
and total batch M trains M / W samples per rank (``hadar/runtime/elastic.py``). Progress is
counted in optimiser steps, as for every real job.
"""

from __future__ import annotations

import re
from types import MappingProxyType

from hadar.core.defaults import REAL_RUN
from hadar.core.errors import InputError
from hadar.core.jobs import Job
from hadar.core.physical_workloads import PHYSICAL_WORKLOADS

ELASTIC_RE = re.compile(r"elastic-(\d+)")
NAMES = ("elastic-2", "elastic-3", "elastic-4")

JOBS = (
    # model, arrival (s), tiny steps, initial total batch M0, largest batch, lr
    ("MM", 0.0, 240, 16, 64, 0.001),
    ("RS", 14.0, 60, 16, 64, 0.001),
    ("LM", 28.0, 100, 16, 64, 1.0),
    ("LT", 42.0, 80, 16, 64, 0.0005),
)
"""The jobs in arrival order; ``elastic-N`` takes the first N. The first job is the long one
(it holds the cluster alone at first and must give GPUs up to each newcomer). Tiny models'
steps are dominated by fixed costs: on emulated GPUs sharing a small CPU, more GPUs at one total
batch need not make them faster, and a policy that measures this (AFS's curves) keeps them on
fewer GPUs."""

MIN_GPUS, MAX_GPUS = 1, 4
"""Every job may run on 1 to 4 GPUs (a rigid policy gives it ``num_gpus`` = 2)."""

RIGID_GPUS = 2
SIZES = {"tiny": 1, "small": 5}
"""Step multiplier per size (``paper`` is not offered: these workloads are for real runs)."""


def elastic_jobs(name: str, size: str = REAL_RUN.size, seed: int = 0) -> list[Job]:
    """The jobs of ``elastic-N`` (ids 0..N-1 in arrival order)."""
    m = ELASTIC_RE.fullmatch(name)
    if m is None or not 1 <= int(m.group(1)) <= len(JOBS):
        raise InputError(
            f"--workload: unknown elastic workload {name!r} (choose {', '.join(NAMES)})"
        )
    if size not in SIZES:
        raise InputError(
            f"--size: {name} is a real-run workload of {', '.join(SIZES)} models (got {size!r})"
        )
    jobs = []
    for i, (short, arrival, steps, m0, m_max, lr) in enumerate(JOBS[: int(m.group(1))]):
        w = PHYSICAL_WORKLOADS[short]
        spec = {
            "model": short,
            "size": size,
            "data": "synthetic",
            "batch_size": m0,
            "lr": lr,
            "seed": seed + i,
        }
        jobs.append(
            Job(
                job_id=i,
                job_type=w.job_type,
                num_gpus=RIGID_GPUS,
                total_steps=float(steps * SIZES[size]),
                arrival=arrival,
                model=short,
                size_class=w.dataset_class,
                spec=MappingProxyType(spec),
                min_gpus=MIN_GPUS,
                max_gpus=MAX_GPUS,
                batch_range=(m0, m_max),
            )
        )
    return jobs
