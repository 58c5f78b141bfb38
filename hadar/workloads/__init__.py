"""Workload sources: the paper's Philly generator, hand-written job lists, the physical mixes.

``load_workload(name)`` accepts ``philly-480`` (any ``philly-N``), ``philly-480-arrivals``
(keep trace arrival times), either with ``-elastic`` (each job may run on 1 GPU up to its
request), a path to a ``.csv``/``.yaml`` job list (or a ``.csv`` in Pollux's
workload schema), a mix ``M-1`` ... ``M-12``, Pollux's ``pollux-N`` / ``pollux-N-load-L``, or a
real-run mix of elastic jobs ``elastic-2`` ... ``elastic-4`` (``hadar.workloads.elastic_mix``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from estimators.throughput import GavelThroughputTable, ThroughputModel
from hadar.core.cluster import Cluster
from hadar.core.defaults import SIMULATED
from hadar.core.errors import InputError
from hadar.core.jobs import Job
from hadar.core.suggest import did_you_mean
from hadar.core.text import duration_text
from hadar.core.validation import look_up

PHILLY_RE = re.compile(r"philly-(\d+)(-arrivals)?(-elastic)?")
MIX_RE = re.compile(r"[Mm]-\d+")
MIX_NAMES = tuple(f"M-{i}" for i in range(1, 13))
"""The paper's physical mixes, as ``--workload`` spells them."""
POLLUX_PREFIX = "pollux-"
ELASTIC_RE = re.compile(r"elastic-\d+")
FILE_SUFFIXES = (".csv", ".yaml", ".yml", ".trace")


def is_builtin(name: str) -> bool:
    """Whether ``name`` is a generated workload (``philly-N``, a mix) rather than a file."""
    return bool(
        PHILLY_RE.fullmatch(name)
        or MIX_RE.fullmatch(name)
        or ELASTIC_RE.fullmatch(name)
        or (name.startswith(POLLUX_PREFIX) and not name.lower().endswith(FILE_SUFFIXES))
    )


def load_workload(
    name: str, table: GavelThroughputTable, seed: int = 0, size: str = SIMULATED.size
) -> list[Job]:
    """Resolve a workload name or file into jobs (not yet validated against a cluster)."""
    m = PHILLY_RE.fullmatch(name)
    if m:
        from hadar.workloads.philly import PhillyOptions, generate

        jobs = generate(
            table,
            PhillyOptions(num_jobs=int(m.group(1)), seed=seed, keep_arrivals=bool(m.group(2))),
        )
        if m.group(3):  # elastic: each job's GPU request becomes its maximum (docs/afs.md)
            jobs = [replace(j, min_gpus=1, max_gpus=j.num_gpus) for j in jobs]
        return jobs
    if name.startswith(POLLUX_PREFIX) and not name.lower().endswith(FILE_SUFFIXES):
        from hadar.workloads.pollux import pollux_jobs

        return pollux_jobs(name)
    if ELASTIC_RE.fullmatch(name):
        from hadar.workloads.elastic_mix import elastic_jobs

        return elastic_jobs(name, size=size, seed=seed)
    if MIX_RE.fullmatch(name):
        from hadar.workloads.mixes import mix_jobs

        return mix_jobs(name.upper(), size=size, seed=seed)
    p = Path(name)
    if p.suffix.lower() == ".trace":
        from hadar.workloads.gavel_trace import read_trace

        return read_trace(p, table)
    if p.suffix.lower() in (".csv", ".yaml", ".yml") or look_up(p, "--workload") is not None:
        from hadar.workloads.files import load_job_file

        return load_job_file(p)
    hint = did_you_mean(name, _spellings(name))
    raise InputError(
        f"--workload: unknown workload {name!r}{hint} "
        "(philly-N, philly-N-arrivals, M-1..M-12, pollux-N, elastic-2..4, or a .csv/.yaml/.trace file)"
    )


def _spellings(name: str) -> list[str]:
    """Names a mistyped ``name`` may have meant, with the number it holds (``phily-20`` means
    ``philly-20``, not ``philly-480``)."""
    digits = re.search(r"\d+", name)
    n = digits.group() if digits else "480"
    return [
        *MIX_NAMES,
        *(f"philly-{n}{suffix}" for suffix in ("", "-arrivals", "-elastic", "-arrivals-elastic")),
        f"pollux-{n}",
        f"elastic-{n}",
    ]


def validate_workload(
    jobs: Sequence[Job],
    cluster: Cluster,
    throughput: ThroughputModel,
    source: str,
    table: GavelThroughputTable | None = None,
) -> None:
    """Reject, up front, any job that could never run on ``cluster``: one line naming job and key.

    ``table`` is the measured table the run was given: a job type it has must have an entry at
    the job's GPU count; a job type it lacks must be one the estimator knows (a physical
    workload such as ``MM``, or a known model family at a new batch size).
    """
    table = (
        table
        if table is not None
        else (throughput if isinstance(throughput, GavelThroughputTable) else None)
    )
    runnable: dict[tuple[int, bytes, bytes], bool] = {}  # by what decides it: W and the rates
    for job in jobs:
        if job.num_gpus > cluster.total_gpus:
            raise InputError(
                f"{source}: job {job.job_id}: needs {job.num_gpus} GPUs but cluster {cluster.name} has {cluster.total_gpus}"
            )
        if table is not None and not job.is_elastic:
            if job.job_type in table.job_types:
                if job.num_gpus not in table.gang_sizes(job.job_type):
                    raise InputError(
                        f"{source}: job {job.job_id}: {table.source} has no entry for ({job.job_type!r}, {job.num_gpus})"
                    )
            elif throughput is table or not _estimator_knows(job.job_type):
                raise InputError(
                    f"{source}: job {job.job_id}: unknown job type {job.job_type!r} (not in {table.source})"
                )
        if not _estimable(throughput, job, cluster, runnable):
            raise InputError(
                f"{source}: job {job.job_id} ({job.job_type!r}, {job.num_gpus} GPUs) can never run on cluster "
                f"{cluster.name}: no placement with a positive throughput"
            )


def check_horizon(
    jobs: Sequence[Job],
    cluster: Cluster,
    throughput: ThroughputModel,
    horizon_s: float,
    source: str,
) -> None:
    """Reject, up front, a workload no policy could finish within ``horizon_s`` of simulated time.

    Two lower bounds, valid for every policy (HadarE's per-node copies included): a job cannot
    finish before its arrival plus its steps at its best rate spread over as many copies as the
    cluster could hold; and all jobs together need their GPU-seconds at best rates, at most
    ``total GPUs x horizon`` of which exist. A rigid gang larger than every node runs only
    across nodes, so its best rate is its best multi-node one (on a declared network, at the
    fastest NIC: a slow network slows it). (Run after :func:`validate_workload`.)
    """
    gpu_seconds = 0.0
    largest_node = int(cluster.capacity.sum(axis=1).max(initial=0))
    for job in jobs:
        rate = _best_rate(job, cluster, throughput, largest_node)
        copies = max(1, min(len(cluster.nodes), cluster.total_gpus // job.num_gpus))
        finish = job.arrival + job.total_steps / (rate * copies)
        if finish > horizon_s:
            raise InputError(
                f"{source}: job {job.job_id}: cannot finish before {duration_text(finish)} of simulated time "
                f"({job.total_steps:g} steps at {rate:g} steps/s at best, arriving at {job.arrival:g} s), "
                f"beyond the horizon of {duration_text(horizon_s)} (--horizon)"
            )
        gpu_seconds += job.total_steps * job.num_gpus / rate
    first = min((j.arrival for j in jobs), default=0.0)
    if first + gpu_seconds / cluster.total_gpus > horizon_s:
        raise InputError(
            f"{source}: the {len(jobs)} jobs need at least {gpu_seconds / 3600:,.0f} GPU-hours at their best rates, "
            f"more than cluster {cluster.name}'s {cluster.total_gpus} GPUs deliver within the horizon of "
            f"{duration_text(horizon_s)} (--horizon)"
        )


def _best_rate(job: Job, cluster: Cluster, throughput: ThroughputModel, largest_node: int) -> float:
    """The fastest rate ``job`` can run at anywhere in ``cluster``: its multi-node figures'
    best when it is a rigid gang no node can hold (``largest_node``: the most GPUs on a node),
    else :meth:`~estimators.throughput.ThroughputModel.best_rate`."""
    if job.is_elastic or job.num_gpus <= largest_node:
        return throughput.best_rate(job, cluster)
    _, uncons = throughput.cell_rates(job, cluster)
    return float(uncons.max(initial=0.0))


def _estimator_knows(job_type: str) -> bool:
    from hadar.core.job_profile import parse_job_type
    from hadar.core.physical_workloads import PHYSICAL_WORKLOADS

    return job_type in PHYSICAL_WORKLOADS or parse_job_type(job_type)[0] is not None


def _estimable(
    throughput: ThroughputModel,
    job: Job,
    cluster: Cluster,
    memo: dict[tuple[int, bytes, bytes], bool] | None = None,
) -> bool:
    """Whether some placement of ``job`` on ``cluster`` has a positive rate (``memo``: answers
    by gang size and rate arrays, which alone decide it on one cluster)."""
    import numpy as np

    from primal_dual.find_alloc import JobRequest, candidate_allocations

    cons, unc = throughput.cell_rates(job, cluster)
    key = (job.num_gpus, np.ascontiguousarray(cons).tobytes(), np.ascontiguousarray(unc).tobytes())
    hit = None if memo is None else memo.get(key)
    if hit is None:
        cands = candidate_allocations(
            JobRequest(job.num_gpus, cons, unc),
            cluster.capacity.copy(),
            np.where(cluster.capacity > 0, 0.0, np.inf),
        )
        hit = bool(cands)
        if memo is not None:
            memo[key] = hit
    return hit
