"""What a job has received so far: the bookkeeping both drivers keep per job (the simulator in
``hadar/simulator/engine.py``, a real run in ``hadar/runtime/run_state.py``) and hand to
policies as a :class:`~hadar.core.jobs.JobStatus`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from hadar.core.jobs import Job, JobStatus


@dataclass
class JobService:
    """A job's attained service, time per GPU type, rounds it ran in, first start and finish
    (seconds from the run's start)."""

    attained: float = 0.0
    """GPU-seconds of execution received (Tiresias' attained service)."""
    time_on_type: dict[str, float] = field(default_factory=dict)
    """Seconds executed per GPU type (Gavel's rounds received, in time)."""
    rounds: int = 0
    first_start: float | None = None
    finish: float | None = None

    def charge(self, gpus: int, seconds: float, gpu_types: Iterable[str]) -> None:
        """Book a run of ``seconds`` on ``gpus`` GPUs; each of ``gpu_types`` (one entry per
        use) gets the seconds."""
        for gtype in gpu_types:
            self.time_on_type[gtype] = self.time_on_type.get(gtype, 0.0) + seconds
        self.attained += gpus * seconds

    def status(self, job: Job, remaining_steps: float) -> JobStatus:
        """The job as a policy sees it."""
        return JobStatus(
            job=job,
            remaining_steps=remaining_steps,
            attained_service=self.attained,
            time_on_type=dict(self.time_on_type),
            rounds_scheduled=self.rounds,
            first_start=self.first_start,
        )
