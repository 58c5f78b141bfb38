"""Small builders shared by the baseline tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from estimators.throughput import GavelThroughputTable
from hadar.core.cluster import Cluster, Node
from hadar.core.jobs import Job, JobStatus
from hadar.policy import RoundContext

TABLE = GavelThroughputTable.bundled()
R18 = "ResNet-18 (batch size 64)"
R50 = "ResNet-50 (batch size 64)"
LM = "LM (batch size 20)"


def job(
    job_id: int, gpus: int = 1, steps: float = 1e6, arrival: float = 0.0, job_type: str = R18
) -> Job:
    return Job(job_id=job_id, job_type=job_type, num_gpus=gpus, total_steps=steps, arrival=arrival)


def status(
    j: Job,
    attained: float = 0.0,
    time_on_type: Mapping[str, float] | None = None,
    remaining: float | None = None,
) -> JobStatus:
    return JobStatus(
        j,
        j.total_steps if remaining is None else remaining,
        attained_service=attained,
        time_on_type=dict(time_on_type or {}),
    )


def context(
    cluster: Cluster,
    statuses: Sequence[JobStatus],
    current=None,
    now: float = 0.0,
    round_index: int = 0,
) -> RoundContext:
    ordered = tuple(sorted(statuses, key=lambda s: (s.job.arrival, s.job_id)))
    return RoundContext(
        now=now,
        round_index=round_index,
        round_s=360.0,
        cluster=cluster,
        jobs=ordered,
        current=current or {},
        throughput=TABLE,
        restart_penalty_s=10.0,
    )


def one_type(gpus: int, gtype: str = "v100", nodes: int = 1) -> Cluster:
    return Cluster("one-type", tuple(Node(f"n{i}", {gtype: gpus}) for i in range(nodes)))


def mixed_nodes() -> Cluster:
    """Nodes holding several GPU types, so that "one type per job" is a real constraint."""
    return Cluster(
        "mixed",
        (
            Node("a", {"v100": 2, "k80": 2}),
            Node("b", {"p100": 2, "k80": 2}),
            Node("c", {"v100": 2, "p100": 2}),
        ),
    )
