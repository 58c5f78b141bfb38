"""A scenario: the cluster, the validated jobs and the throughput model a run needs.

Shared by the CLI, the Python API (:mod:`hadar.api`), the experiments and the runtime; each
part may be given by name/path (as on the command line) or as an object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from estimators.throughput import GavelThroughputTable, ThroughputModel
from hadar.clusters import load_cluster
from hadar.core.cluster import Cluster
from hadar.core.defaults import PHILLY_FAMILY, POLLUX_FAMILY, SIMULATED, WorkloadFamily
from hadar.core.errors import InputError
from hadar.core.jobs import Job
from hadar.policy import Policy, round_for
from hadar.workloads import (
    FILE_SUFFIXES,
    PHILLY_RE,
    POLLUX_PREFIX,
    check_horizon,
    load_workload,
    validate_workload,
)

ClusterLike = Cluster | str | Path
"""A :class:`Cluster`, a cluster YAML path, or a bundled name like ``"sim-60gpu"``."""
WorkloadLike = Sequence[Job] | str | Path
"""Jobs, a job-list/trace path, or a name: ``philly-N``, ``philly-N-arrivals``, ``M-1``..``M-12``."""
TableLike = GavelThroughputTable | str | Path | None
"""A measured table, a throughputs JSON path in Gavel's schema, or None for Gavel's bundled table."""


def load_table(path: TableLike) -> GavelThroughputTable:
    """The measured throughput table (Gavel's bundled measurements when ``path`` is None)."""
    if isinstance(path, GavelThroughputTable):
        return path
    return GavelThroughputTable.bundled() if path is None else GavelThroughputTable.from_file(path)


def load_scenario(
    cluster: ClusterLike,
    workload: WorkloadLike,
    throughputs: TableLike = None,
    seed: int = 0,
    size: str = SIMULATED.size,
    horizon_s: float | None = None,
) -> tuple[Cluster, list[Job], ThroughputModel]:
    """Cluster, validated jobs and the throughput model the jobs need on that cluster. Bad input
    is one :class:`~hadar.core.errors.InputError` line naming the file and field; with ``horizon_s``, so
    is a workload no policy could finish within that much simulated time."""
    c = cluster if isinstance(cluster, Cluster) else load_cluster(cluster)
    table = load_table(throughputs)
    if isinstance(workload, (str, Path)):
        source = str(workload)
        jobs = load_workload(source, table, seed=seed, size=size)
    else:
        source, jobs = "jobs", list(workload)
    throughput = throughput_for(jobs, c, table)
    validate_workload(jobs, c, throughput, source=source, table=table)
    if horizon_s is not None:
        check_horizon(jobs, c, throughput, horizon_s, source=source)
    return c, jobs, throughput


def check_round(round_s: float | None, restart_penalty_s: float) -> None:
    """A restart penalty as long as a round would leave a restarted job no time to progress."""
    if round_s is not None and restart_penalty_s >= round_s:
        raise InputError(
            f"--restart-penalty: {restart_penalty_s:g} s must be shorter than a round "
            f"(--round {round_s:g} s), else a restarted job never progresses"
        )


def check_job_restarts(jobs: Sequence[Job], round_s: float, source: str) -> None:
    """:func:`check_round` for the jobs that give their own ``restart_s`` (Pollux's job files):
    one as long as a round was cut to the round, so a one-day restart cost a minute."""
    for job in jobs:
        if job.restart_s is not None and job.restart_s >= round_s:
            raise InputError(
                f"{source}: job {job.job_id}: restart_s: {job.restart_s:g} s must be shorter "
                f"than a round ({round_s:g} s), else a restarted job never progresses"
            )


def throughput_for(
    jobs: Sequence[Job], cluster: Cluster, table: GavelThroughputTable
) -> ThroughputModel:
    """The measured table when it covers every (job type, GPU count) of the run on every GPU
    type of the cluster, else the composite model (measured where available, PMI/PCIe estimate
    of Eq. 10 elsewhere; the measured table interpolated between measured GPU counts when a job
    is elastic, ``estimators/gang_sizes.py``); wrapped in the Pollux traces' goodput model when
    a job is one of Pollux's applications. A (job type, GPU count) the table lacks is rejected later by
    :func:`hadar.workloads.validate_workload`."""
    from estimators.composite import CompositeThroughput
    from estimators.gang_sizes import InterpolatedGangs
    from hadar.workloads.pollux_throughput import PolluxThroughput, is_pollux_job

    pollux = any(is_pollux_job(j) for j in jobs)
    needed = {(j.job_type, j.num_gpus) for j in jobs if not is_pollux_job(j)}
    if all(table.measured(jt, k, w) is not None for jt, w in needed for k in cluster.gpu_types):
        base: ThroughputModel = table
        if any(j.is_elastic and not is_pollux_job(j) for j in jobs):
            base = InterpolatedGangs(table)  # elastic jobs run on counts the table may lack
        return PolluxThroughput(base) if pollux else base
    return PolluxThroughput(CompositeThroughput(table)) if pollux else CompositeThroughput(table)


def comparison_default_set(jobs: Sequence[Job]) -> str:
    """The default policy set (``hadar.policy.DEFAULT_SETS``) a comparison of ``jobs`` uses:
    ``compare-elastic`` (the Pollux paper's comparison) when a job has efficiency data (one of
    Pollux's applications, the ``pollux-N`` workloads), else ``compare``."""
    from hadar.workloads.pollux_throughput import is_pollux_job

    return "compare-elastic" if any(is_pollux_job(j) for j in jobs) else "compare"


def workload_family(workload: WorkloadLike) -> WorkloadFamily | None:
    """The paper family ``workload`` belongs to (:class:`~hadar.core.defaults.WorkloadFamily`):
    ``pollux-N`` names and job lists of Pollux's applications are Pollux's, ``philly-N...``
    names the Hadar paper's; files and other names belong to none. Decided without loading."""
    if isinstance(workload, (str, Path)):
        name = str(workload)
        if name.startswith(POLLUX_PREFIX) and not name.lower().endswith(FILE_SUFFIXES):
            return POLLUX_FAMILY
        return PHILLY_FAMILY if PHILLY_RE.fullmatch(name) else None
    from hadar.workloads.pollux_throughput import is_pollux_job

    jobs = list(workload)
    return POLLUX_FAMILY if jobs and all(is_pollux_job(j) for j in jobs) else None


def family_round(
    family: WorkloadFamily | None, policies: Sequence[str | type[Policy]], given: float | None
) -> float:
    """The round a run of ``policies`` on a workload of ``family`` uses: ``given`` when given,
    else the family's, else the shortest the policies declare, else the simulator's default."""
    if given is None and family is not None and family.round_s is not None:
        return family.round_s
    return round_for(policies, given, SIMULATED.round_s)


def family_options(
    family: WorkloadFamily | None, policy: str, given: Mapping[str, str] | None
) -> dict[str, str]:
    """``policy``'s knobs on a workload of ``family``: the family's, each replaced by the one
    typed (``given``) of the same key."""
    base = family.options_for(policy) if family is not None else {}
    return {**base, **(given or {})}


def family_note(
    family: WorkloadFamily | None,
    policies: Sequence[str],
    given_round: float | None,
    given_options: Mapping[str, Mapping[str, str]] | None,
) -> str | None:
    """The line saying which of the family's settings a run takes (None when it takes none)."""
    if family is None:
        return None
    parts = []
    if given_round is None and family.round_s is not None:
        parts.append(f"round {family.round_s:g} s")
    for p in policies:
        typed = (given_options or {}).get(p, {})
        taken = {k: v for k, v in family.options_for(p).items() if k not in typed}
        if taken:
            parts.append(f"{p}: " + ", ".join(f"{k}={v}" for k, v in sorted(taken.items())))
    if not parts:
        return None
    return (
        f"{family.name} set-up ({family.paper}): {'; '.join(parts)}; "
        "--round / --policy-opt to change"
    )
