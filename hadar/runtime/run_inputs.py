"""A run's inputs read and checked before anything is written or heavy is imported: the cluster,
the jobs and their training specs, the throughput prior, the policy and the node stream. ``hadar
run`` refuses bad input from here, before it imports the coordinator (and with it torch)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from estimators.throughput import ThroughputModel
from hadar.clusters import load_cluster
from hadar.core.cluster import Cluster
from hadar.core.errors import InputError
from hadar.core.jobs import Job
from hadar.core.node_stream import NodeStream
from hadar.policy import Policy
from hadar.policy_options import policy_with_options
from hadar.providers.base import check_provider_setup
from hadar.providers.registry import provider_kind
from hadar.runtime.config import RunConfig, RuntimeKnobs, check_run_jobs
from hadar.runtime.node_manager import load_stream
from hadar.runtime.slurm_stream import SlurmStreamSpec
from hadar.scenario import load_table, throughput_for
from hadar.workloads import load_workload, validate_workload
from nodes.spec import SYNTHETIC, JobSpec, parse_spec


@dataclass(frozen=True)
class RunInputs:
    """What a run starts from, checked: ``cfg`` as the run will use it (fresh workers where the
    provider cannot keep warm ones)."""

    cfg: RunConfig
    knobs: RuntimeKnobs
    cluster: Cluster
    jobs: list[Job]
    specs: dict[int, JobSpec]
    prior: ThroughputModel
    policy: Policy
    stream: NodeStream | SlurmStreamSpec | None


def accept_run_inputs(cfg: RunConfig, knobs: RuntimeKnobs | None = None) -> RunInputs:
    """Read and check a run's inputs; bad input raises a one-line ``InputError`` naming the file,
    row and field, before anything is written."""
    cluster = load_cluster(cfg.cluster)
    kind = provider_kind(cluster.provider)
    if cfg.warm_workers and kind is not None and not kind.warm_workers:
        cfg = cfg.model_copy(update={"warm_workers": False})  # e.g. Slurm: fresh workers
    knobs = knobs or cfg.knobs
    table = load_table(None)
    jobs = load_workload(cfg.workload, table, seed=cfg.seed, size=cfg.size)
    specs = {j.job_id: _job_spec(j, cfg.workload) for j in jobs}
    if kind is not None and (kind.shares_machine or kind.shared_filesystem):
        _check_data_paths(specs, cfg.workload, cluster.provider)
    prior = throughput_for(jobs, cluster, table)
    validate_workload(jobs, cluster, prior, source=cfg.workload, table=table)
    check_run_jobs(jobs, cfg.workload, cfg.max_job_count)
    policy = policy_with_options(cfg.policy, cfg.policy_options, **knobs.fixed_for(cfg.policy))
    stream = load_stream(cfg, cluster)
    check_provider_setup(cluster)  # missing credentials and key files too
    return RunInputs(cfg, knobs, cluster, jobs, specs, prior, policy, stream)


def _job_spec(job: Job, workload: str) -> JobSpec:
    """The job's training spec, validated as the worker will (before any round is dispatched)."""
    if not job.spec:
        raise InputError(
            f"{workload}: job {job.job_id}: no training spec (real runs need model, size, data, "
            f"batch_size, lr)"
        )
    return parse_spec(dict(job.spec), f"{workload}: job {job.job_id}: spec")


def _check_data_paths(specs: dict[int, JobSpec], workload: str, provider: str) -> None:
    """Refuse before any round an absolute ``data`` path that does not exist, where the nodes see
    this machine's files (a worker would fail on it every round). A relative path is left to the
    worker: it is relative to the node's working directory, which the run creates."""
    for job_id, spec in specs.items():
        if spec.data == SYNTHETIC:
            continue
        path = Path(spec.data).expanduser()
        if path.is_absolute() and not path.exists():
            raise InputError(
                f"{workload}: job {job_id}: spec: data: path does not exist: {spec.data} "
                f"(the {provider} nodes read this machine's files)"
            )
