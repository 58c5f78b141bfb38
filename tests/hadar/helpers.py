"""Small builders shared by the core tests."""

from __future__ import annotations

from estimators.throughput import GavelThroughputTable
from hadar.core.cluster import Cluster, Node
from hadar.core.jobs import Job, JobStatus
from hadar.loop import Decision
from hadar.policy import RoundContext

TABLE = GavelThroughputTable.bundled()


def context(
    cluster: Cluster, jobs: list[Job], current=None, now: float = 0.0, remaining=None
) -> RoundContext:
    statuses = tuple(
        JobStatus(j, (remaining or {}).get(j.job_id, j.total_steps))
        for j in sorted(jobs, key=lambda j: (j.arrival, j.job_id))
    )
    return RoundContext(
        now=now,
        round_index=0,
        round_s=360.0,
        cluster=cluster,
        jobs=statuses,
        current=current or {},
        throughput=TABLE,
    )


MIXED = Cluster(
    "mixed",
    (
        Node("a", {"t4": 4}),
        Node("b", {"t4": 4}),
        Node("c", {"v100": 8}),
        Node("d", {"k80": 8}),
    ),
)
"""Three GPU types, nodes of 4 and 8: the shape of Sia's clusters, small."""


def small_cluster() -> Cluster:
    return Cluster("small", (Node("v", {"v100": 2}), Node("p", {"p100": 2}), Node("k", {"k80": 4})))


class RecordingExecutor:
    """Wraps an executor (e.g. the simulator's) and keeps every round's :class:`Decision`, with
    the policy's state after it (as a real run's journal does)."""

    keeps_policy_state = True

    def __init__(self, executor) -> None:
        self.inner, self.decisions = executor, []

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def record(self, decision: Decision, outcome) -> None:
        self.decisions.append(decision)
        self.inner.record(decision, outcome)
