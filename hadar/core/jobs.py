"""Jobs (value objects) and their run-time status as policies see it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from hadar.core.errors import InputError

if TYPE_CHECKING:
    from hadar.core.job_profile import JobProfile

SIZE_CLASSES = ("S", "M", "L", "XL")


@dataclass(frozen=True)
class Job:
    """A training job.

    ``job_type`` keys the throughput source (e.g. Gavel's ``"ResNet-18 (batch size 64)"``);
    ``num_gpus`` is the gang size W (all-or-nothing; for an elastic job, the GPU count a rigid
    policy gives it); ``total_steps`` is N_j (for an elastic job with efficiency data: samples at
    its initial batch size, docs/elastic.md).
    ``model``/``size_class``/``spec`` describe the training for real runs and estimators.
    """

    job_id: int
    job_type: str
    num_gpus: int
    total_steps: float
    arrival: float = 0.0
    weight: float = 1.0
    model: str | None = None
    size_class: str | None = None
    spec: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    min_gpus: int | None = None
    """Elastic jobs: the fewest GPUs the job may run on (None: ``num_gpus``, a rigid gang)."""
    max_gpus: int | None = None
    """Elastic jobs: the most GPUs the job may run on (None: ``num_gpus``)."""
    batch_range: tuple[int, int] | None = None
    """Elastic jobs: the total batch sizes a policy may choose (None: the job's own batch)."""
    restart_s: float | None = None
    """Seconds a re-allocation (checkpoint-restart) costs this job (None: the run's setting)."""

    def __post_init__(self) -> None:
        lo, hi = self.gpu_range
        if not 1 <= lo <= self.num_gpus <= hi:
            raise InputError(
                f"job {self.job_id}: min_gpus <= gpus <= max_gpus must hold with min_gpus >= 1 "
                f"(got {lo}, {self.num_gpus}, {hi})"
            )
        if self.batch_range is not None and not 1 <= self.batch_range[0] <= self.batch_range[1]:
            raise InputError(
                f"job {self.job_id}: batch_range must be 1 <= low <= high (got {self.batch_range})"
            )
        if self.restart_s is not None and not 0 <= self.restart_s < float("inf"):
            raise InputError(f"job {self.job_id}: restart_s must be >= 0 (got {self.restart_s})")

    @property
    def gpu_range(self) -> tuple[int, int]:
        """(fewest, most) GPUs the job may run on; ``(num_gpus, num_gpus)`` for a rigid job."""
        lo = self.num_gpus if self.min_gpus is None else self.min_gpus
        hi = self.num_gpus if self.max_gpus is None else self.max_gpus
        return lo, hi

    def restart_cost_s(self, default_s: float) -> float:
        """Seconds a checkpoint-restart costs this job: its own ``restart_s``, else the run's
        ``default_s`` (``--restart-penalty``)."""
        return default_s if self.restart_s is None else self.restart_s

    @property
    def is_elastic(self) -> bool:
        """Whether a policy may change the job's GPU count or batch size."""
        lo, hi = self.gpu_range
        return lo < hi or self.batch_range is not None

    @cached_property
    def profile(self) -> JobProfile:
        """The job's typed profile (family, batch size, Eq. 10 classes), derived once from its
        type and fields (:func:`hadar.core.job_profile.job_profile`); an InputError names the
        job if its classes are invalid."""
        from hadar.core.job_profile import job_profile  # it imports Job

        return job_profile(self)


Placement = Mapping[str, Mapping[str, int]]
"""Where a job (or copy) runs: ``{node name: {gpu type: count}}``."""


def placement_gpus(placement: Placement) -> int:
    """How many GPUs ``placement`` holds."""
    return sum(c for per in placement.values() for c in per.values())


def as_gang(job: Job, width: int, batch: int | None) -> Job:
    """``job`` as a rigid gang of ``width`` GPUs at total batch ``batch`` (None: its own)."""
    spec = dict(job.spec)
    if batch is not None:
        spec["batch_size"] = batch
    return replace(job, num_gpus=width, spec=MappingProxyType(spec))


def at_placement(job: Job, placement: Placement) -> Job:
    """``job`` as it runs on ``placement``: an elastic job at the placement's GPU count when
    that count is within its range; any other job unchanged."""
    g = placement_gpus(placement)
    lo, hi = job.gpu_range
    return replace(job, num_gpus=g) if g != job.num_gpus and lo <= g <= hi else job


@dataclass(frozen=True)
class JobStatus:
    """A job's progress, as the simulator or the cluster loop reports it to a policy."""

    job: Job
    remaining_steps: float
    attained_service: float = 0.0
    """GPU-seconds of execution received so far (Tiresias' attained service)."""
    time_on_type: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    """Seconds executed per GPU type (Gavel's rounds received, in time)."""
    rounds_scheduled: int = 0
    first_start: float | None = None

    @property
    def job_id(self) -> int:
        return self.job.job_id

    @property
    def done_steps(self) -> float:
        return self.job.total_steps - self.remaining_steps
