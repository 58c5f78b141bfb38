"""Jobs (value objects) and their run-time status as policies see it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hadar.core.job_profile import JobProfile

SIZE_CLASSES = ("S", "M", "L", "XL")


@dataclass(frozen=True)
class Job:
    """A training job.

    ``job_type`` keys the throughput source (e.g. Gavel's ``"ResNet-18 (batch size 64)"``);
    ``num_gpus`` is the gang size W (all-or-nothing); ``total_steps`` is N_j.
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

    @cached_property
    def profile(self) -> JobProfile:
        """The job's typed profile (family, batch size, Eq. 10 classes), derived once from its
        type and fields (:func:`hadar.core.job_profile.job_profile`); an InputError names the
        job if its classes are invalid."""
        from hadar.core.job_profile import job_profile  # it imports Job

        return job_profile(self)


Placement = Mapping[str, Mapping[str, int]]
"""Where a job (or copy) runs: ``{node name: {gpu type: count}}``."""


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
