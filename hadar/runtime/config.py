"""A run's configuration, saved as ``RUNDIR/run.json`` so ``hadar run --resume`` needs nothing else."""

from __future__ import annotations

import stat
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from hadar.core.defaults import REAL_RUN
from hadar.core.errors import InputError
from hadar.core.io import write_json
from hadar.core.jobs import Job
from hadar.core.renames import current_keys
from hadar.core.safe_paths import PathEscapeError
from hadar.core.validation import DAY_S, from_validation_error, load_json, look_up
from hadar.policy_options import config_knobs, effective_options
from hadar.runtime.identity import RunIdentity

CLOCK_SKEW_S = 3600.0
"""How far in the future a run's recorded start may lie (clocks set apart)."""


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    cluster: str
    """Path of the cluster file (re-read every round, so nodes may join or leave)."""
    workload: str
    size: str = REAL_RUN.size
    policy: str = REAL_RUN.policy
    policy_options: dict[str, str] = Field(default_factory=dict)
    """``--policy-opt`` knobs of the policy (kept so that a resumed run decides the same way)."""
    round_s: float = Field(default=REAL_RUN.round_s, gt=0, le=DAY_S)
    grace_s: float = Field(default=REAL_RUN.grace_s, ge=0, le=DAY_S)
    """Extra seconds past the round before a silent copy is declared hung and killed."""
    seed: int = 0
    max_job_count: int = Field(default=1000, ge=2)
    threads: int = Field(default=1, ge=0, le=1024)
    """torch CPU threads per worker (0 = torch's default)."""
    evaluate: bool = True
    """Score each finished job's final model on its held-out split."""
    warm_workers: bool = True
    """Run workers through a warm per-node server (torch stays imported between rounds)."""
    probe_every: int = Field(default=1, ge=1)
    """Re-probe nodes marked down every this many rounds."""
    keep_checkpoints: int = Field(default=2, ge=1)
    """Verified checkpoints kept per job (the latest and the ones a damaged one rolls back to)."""
    stall_rounds: int = Field(default=5, ge=1)
    """Rounds in a row without progress after which a job is given up (or the run stopped)."""
    keep_node_dirs: bool = False
    """Keep the nodes' work directories after a run completes (deleted by default)."""
    node_stream: str | None = None
    """Path of a ``time,node,event`` CSV: nodes join and leave on its schedule, counted from
    ``started_at`` (hadar/runtime/node_stream.py); None: every node that answers is up."""
    started_at: float = Field(gt=0, allow_inf_nan=False)
    """Wall-clock start of the run (Unix seconds); TTD and JCT count from here."""
    restart_penalty_s: float = Field(default=REAL_RUN.restart_penalty_s, ge=0, le=DAY_S)
    """What a policy assumes a checkpoint-restart costs (fixed for the run)."""
    aggregation_overhead_s: float = Field(default=REAL_RUN.aggregation_overhead_s, ge=0, le=DAY_S)
    """What HadarE assumes averaging costs per round (fixed for the run)."""
    identity: RunIdentity | None = None
    """Digests of the cluster file, workload, size and policy; ``--resume`` refuses a mismatch."""

    @field_validator("run_id", "policy", "size")
    @classmethod
    def _printable(cls, value: str) -> str:
        # shown in tables, figure titles and messages: an escape sequence there reached the
        # terminal raw (matplotlib's "glyph missing" warning quotes a title's characters)
        if not value.isprintable():
            raise ValueError("holds control characters")
        return value

    @field_validator("started_at")
    @classmethod
    def _not_in_the_future(cls, value: float) -> float:
        # a start in the future made a resumed run wait for its first arrival forever
        if value > time.time() + CLOCK_SKEW_S:
            raise ValueError("the run's start is in the future (this machine's clock says now)")
        return value

    @property
    def knobs(self) -> RuntimeKnobs:
        return RuntimeKnobs(self.restart_penalty_s, self.aggregation_overhead_s)

    def all_policy_options(self) -> dict[str, str]:
        """Everything that configures the policy: every knob of its config once the
        ``--policy-opt`` pairs are applied (defaults included) and the runtime knobs."""
        knobs = effective_options(
            self.policy, self.policy_options, **self.knobs.fixed_for(self.policy)
        )
        return {
            **knobs,
            "restart_penalty_s": f"{self.restart_penalty_s:g}",
            "aggregation_overhead_s": f"{self.aggregation_overhead_s:g}",
        }


MAX_RUN_ARRIVAL_S = 7 * 86_400
"""Latest arrival a real run accepts, in seconds after its start: 7 days (``hadar run`` waits for
arrivals in wall-clock time; the simulator has its own ``--horizon``)."""


def check_run_jobs(jobs: Sequence[Job], source: str, max_job_count: int) -> None:
    """One-line InputError naming the file, row and field of the first job a real run cannot
    take: an id the Job Tracker cannot hold, or an arrival beyond :data:`MAX_RUN_ARRIVAL_S`."""
    suffix = Path(source).suffix.lower()
    label = {".csv": "row", ".yaml": "jobs", ".yml": "jobs", ".trace": "line"}.get(suffix, "job")
    for i, job in enumerate(jobs):
        row = f"{label}[{i + 1 if label == 'line' else i}]"
        if job.job_id >= max_job_count:
            raise InputError(
                f"{source}: {row}.id: {job.job_id} is more than a real run tracks "
                f"(job ids 0-{max_job_count - 1})"
            )
        if job.arrival > MAX_RUN_ARRIVAL_S:
            raise InputError(
                f"{source}: {row}.arrival: {job.arrival:g} s is beyond a real run's horizon of "
                f"{MAX_RUN_ARRIVAL_S:,} s (7 days; hadar run waits for arrivals in real time)"
            )


def save_config(cfg: RunConfig, rundir: Path) -> None:
    """Write ``run.json`` (durably; no component of its path followed through a link)."""
    write_json(rundir.resolve() / "run.json", cfg.model_dump(), durable=True, nofollow=True)


def load_config(rundir: Path, hint: str = "start a run without --resume") -> RunConfig:
    """The run's ``run.json``; a directory without one is an error ending with ``hint``."""
    path = rundir / "run.json"
    found = look_up(path, "run directory")  # a name over 255 bytes, a link loop: one line
    if path.is_symlink():  # a run never makes one: planted, and not followed
        raise PathEscapeError(
            f"{path}: a symbolic link in run directory {rundir}, which hadar never creates; "
            "remove it (hadar does not follow links in a run directory)"
        )
    if found is None or not stat.S_ISREG(found.st_mode):
        raise InputError(f"{rundir}: not a run directory (no run.json); {hint}")
    data = load_json(path, "run file")  # one line for bytes that are not UTF-8 JSON too
    if isinstance(data, dict):  # a run started before a rename saved the old key (``slot_s``)
        data = current_keys(data, str(path))
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(str(path), exc) from None


@dataclass(frozen=True)
class RuntimeKnobs:
    """Policy-side estimates for real runs (documented in docs/runtime.md)."""

    restart_penalty_s: float = REAL_RUN.restart_penalty_s
    """What a policy assumes a checkpoint-restart costs: starting a worker and loading a model."""
    aggregation_overhead_s: float = REAL_RUN.aggregation_overhead_s
    """What HadarE assumes averaging costs a forked job per round on real nodes."""

    def fixed_for(self, policy: str) -> dict[str, float]:
        """The knobs that go into policy ``policy``'s config: those its config class has a field
        for (HadarE's ``aggregation_overhead_s``)."""
        return config_knobs(policy, asdict(self))
