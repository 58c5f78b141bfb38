"""What PolluxAgent learns about a job, and from where (imported by the policy when it decides:
the traces load pandas and scipy).

Jobs of Pollux's six applications have traces (``goodput.traces``): in simulation an agent
observes the noise-free ground truth of the configuration its job ran on, as Pollux's simulator
feeds its agents. Elastic jobs of real runs with a batch range (``elastic-N``) are *measured*:
their agent observes what their workers reported (iteration times and gradient norms,
``ThroughputModel.iterations``). Other jobs have no efficiency data; their goodput is the run's
throughput model (steps/s), which they are valued by.
"""

from __future__ import annotations

import numpy as np

from estimators.iterations import IterationSample
from estimators.throughput import ThroughputModel
from goodput import GradParams
from goodput.scaling import grad_of
from goodput.traces import bundled_trace
from hadar.core.cluster import Cluster
from hadar.core.jobs import Job, JobStatus, Placement
from hadar.workloads.gpu_scaling import compute_scale as _compute_scale
from hadar.workloads.pollux_throughput import is_pollux_job
from pollux.agent import AgentState, ProfilePoint
from pollux.speedup import BestGoodput


def has_traces(job: Job) -> bool:
    """Whether the job is one of Pollux's applications (throughput and efficiency data)."""
    return is_pollux_job(job)


def pinned(job: Job) -> bool:
    """Whether Pollux runs ``job`` as the official simulator does for NCF: one GPU, its largest
    batch (:data:`hadar.workloads.pollux.PINNED_APPLICATIONS`)."""
    from hadar.workloads.pollux import PINNED_APPLICATIONS

    return has_traces(job) and job.job_type in PINNED_APPLICATIONS and job.batch_range is not None


def is_measured(job: Job) -> bool:
    """A job whose agent learns from its workers' reports: elastic, with a batch range, and not
    one of Pollux's applications (those read the traces)."""
    return job.batch_range is not None and not has_traces(job)


def new_measured_agent(job: Job) -> AgentState:
    """A fresh agent of a measured job: M0 and the largest batch are its batch range; any local
    batch from 1 to the largest (the worker trains the total batch split over its replicas)."""
    assert job.batch_range is not None
    lo, hi = job.batch_range
    return AgentState(
        init_batch_size=lo, max_batch_size=hi, local_bsz_bounds=(1, hi), adaptive=lo < hi
    )


def measured_observation(
    sample: IterationSample, init_batch: int
) -> tuple[ProfilePoint, GradParams | None]:
    """What a worker reported of one round, as the agent records it."""
    point = ProfilePoint(
        sample.num_nodes,
        sample.num_replicas,
        sample.local_bsz,
        sample.step_time,
        min(sample.sync_time, sample.step_time),
    )
    return point, grad_of(sample, init_batch)


def compute_scale(gpu_type: str, application: str | None = None) -> float:
    """Compute time on ``gpu_type`` relative to the T4 the traces were measured on (for
    ``application``: Gavel's measured ratios where its table has the type)."""
    return _compute_scale(gpu_type, application)[0]


def new_agent(job: Job) -> AgentState:
    """A fresh agent: M0, the largest batch and local-batch bounds of the job's application;
    the batch adapts when the job declares a batch range."""
    trace = bundled_trace(job.job_type)
    hi = (
        trace.max_batch_size
        if job.batch_range is None
        else min(job.batch_range[1], trace.max_batch_size)
    )
    adaptive = job.batch_range is not None and job.batch_range[0] < job.batch_range[1]
    return AgentState(
        init_batch_size=trace.init_batch_size,
        max_batch_size=max(hi, trace.init_batch_size),
        local_bsz_bounds=(trace.min_local_bsz, trace.max_local_bsz),
        adaptive=adaptive,
    )


def max_useful_gpus(job: Job) -> int:
    """More GPUs than the largest batch over the smallest local batch cannot be used."""
    trace = bundled_trace(job.job_type)
    return max(trace.max_batch_size // trace.min_local_bsz, 1)


def simulated_observation(
    status: JobStatus, placement: Placement, batch: int
) -> tuple[ProfilePoint, GradParams]:
    """The iteration time (one pass, T4-equivalent) and gradient statistics the job's agent
    measured last round on ``placement`` at total batch ``batch``."""
    trace = bundled_trace(status.job.job_type)
    per_node = tuple(sum(per.values()) for per in placement.values() if sum(per.values()) > 0)
    gpus = sum(per_node)
    local, accum = trace.split_batch(gpus, batch)
    step, sync = trace.iteration_time(per_node, local)
    progress = status.done_steps / trace.init_batch_size
    grad = trace.grad_stats(gpus * local * (accum + 1), progress)
    return ProfilePoint(len(per_node), gpus, local, step, sync), grad


def throughput_goodput(job: Job, cluster: Cluster, model: ThroughputModel) -> list[BestGoodput]:
    """Per GPU type, the job's speed on K GPUs (co-located or not) from the run's throughput
    model at its own gang size, linear in K elsewhere (no efficiency data: throughput only)."""
    cons, unc = model.cell_rates(job, cluster)
    out: list[BestGoodput] = []
    width = max(job.num_gpus, 1)
    for t in range(len(cluster.gpu_types)):
        has = cluster.capacity[:, t] > 0
        r_local = float(cons[has, t].max()) if has.any() else 0.0
        r_spread = float(unc[has, t].max()) if has.any() else 0.0

        def fn(
            num_nodes: np.ndarray, num_gpus: np.ndarray, a: float = r_local, b: float = r_spread
        ) -> np.ndarray:
            rate: np.ndarray = (
                np.where(np.asarray(num_nodes) > 1, b, a) * np.asarray(num_gpus) / width
            )
            return rate

        out.append(fn)
    return out


def fixed_batch(job: Job) -> int | None:
    """A job's own total batch size, if it declares one."""
    batch = job.spec.get("batch_size")
    return int(batch) if batch is not None else None
