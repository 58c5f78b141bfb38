"""What a simulation (or a real run) records: per job, per round, per placement."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from estimators.throughput import EstimatedCell


@dataclass(frozen=True)
class JobRecord:
    job_id: int
    job_type: str
    num_gpus: int
    arrival: float
    start: float | None
    finish: float | None
    restarts: int
    total_steps: float = 0.0
    best_rate: float | None = None
    """Steps/s of the job's fastest placement on this cluster (for work efficiency)."""
    equal_share_rate: float | None = None
    """Steps/s with its time split over GPU types by GPU count (for finish-time fairness)."""
    step_sum: float | None = None
    """Progress the steps accounting credited (each forked copy's own progress in full, as the
    Job Tracker's step sum); above ``total_steps`` when goodput accounting bounded its forks."""

    @property
    def jct(self) -> float | None:
        return None if self.finish is None else self.finish - self.arrival

    @property
    def queueing_delay(self) -> float | None:
        return None if self.start is None else self.start - self.arrival


@dataclass(frozen=True)
class RoundRecord:
    index: int
    time: float
    duration: float
    busy_gpus: int
    """GPUs allocated at the start of the round."""
    busy_gpu_seconds: float
    """GPU-seconds actually held by running jobs (a job that finishes early frees its GPUs)."""
    active_seconds: float
    """Seconds of this round during which unfinished jobs existed."""
    busy_nodes: int
    """Nodes with at least one GPU allocated at the start of the round."""
    busy_node_seconds: float
    """Node-seconds during which at least one job ran on the node (sum over nodes)."""
    running_jobs: int
    queued_jobs: int
    decision_seconds: float
    info: dict[str, Any] = field(default_factory=dict)
    goodput: float | None = None
    """Elastic runs with efficiency data: their summed goodput (samples at M0 per second)."""
    efficiency: float | None = None
    """Elastic runs with efficiency data: their mean statistical efficiency, weighted by
    throughput (so ``goodput`` / the runs' samples per second)."""


@dataclass(frozen=True)
class PlacementRecord:
    round_index: int
    time: float
    job_id: int
    copy: int
    node: str
    gpu_type: str
    count: int
    gpus: int = 0
    """GPUs of the whole run (job or copy) this row is part of."""
    batch_size: int | None = None
    """Elastic runs: total batch size of one iteration."""
    throughput: float | None = None
    """Elastic runs: samples per second of the whole run."""
    efficiency: float | None = None
    """Elastic runs: statistical efficiency relative to the initial batch (Pollux Eq. 6)."""
    goodput: float | None = None
    """Elastic runs: throughput x efficiency, samples at the initial batch per second."""
    estimated: bool = False
    """Whether the run's speed was scaled from another GPU type's measurements."""
    after: int | None = None
    """A refill: the job whose run on these GPUs this run followed within the round."""


@dataclass(frozen=True)
class SimulationResult:
    policy: str
    cluster: str
    total_gpus: int
    total_nodes: int
    jobs: tuple[JobRecord, ...]
    rounds: tuple[RoundRecord, ...]
    placements: tuple[PlacementRecord, ...]
    config: dict[str, Any]
    gpu_busy_seconds: dict[str, float] = field(default_factory=dict)
    """Per GPU ("node/type#i") busy seconds, for Gavel-style utilisation."""
    estimated_cells: tuple[EstimatedCell, ...] = ()
    """Throughput figures the run used that are estimates, not measurements."""
