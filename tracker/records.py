"""The Job Tracker's value objects (what its methods return) and the checks of ids it is given."""

from __future__ import annotations

import operator
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class CheckpointRef:
    """A consolidated checkpoint: absolute path, sha256, and the round that produced it
    (None for the job's registered initial checkpoint)."""

    path: Path
    sha256: str
    round: int | None


@dataclass(frozen=True)
class JobState:
    job_id: int
    target_steps: int
    steps_done: int
    completed: bool
    model: str | None
    size: str | None
    checkpoint: CheckpointRef | None
    active_copies: tuple[int, ...]

    @property
    def remaining_steps(self) -> int:
        return self.target_steps - self.steps_done


@dataclass(frozen=True)
class Report:
    round: int
    copy_id: int
    job_id: int
    node: str
    steps: int
    seconds: float
    checkpoint: Path
    sha256: str


@dataclass(frozen=True)
class JobRoundResult:
    """What a closed round did to one job."""

    job_id: int
    copies: tuple[int, ...]
    steps_reported: int
    steps_added: int
    steps_total: int
    completed: bool
    checkpoint: CheckpointRef | None


@dataclass(frozen=True)
class Quarantine:
    """A damaged or missing checkpoint set aside: where it was, where it went (None when it was
    missing), and why."""

    job_id: int
    path: Path
    moved_to: Path | None
    reason: str


@dataclass(frozen=True)
class Rollback:
    """A job moved back to its newest good checkpoint (``checkpoint`` None: its initial state)."""

    job_id: int
    quarantined: tuple[Quarantine, ...]
    from_steps: int
    to_steps: int
    checkpoint: CheckpointRef | None
    reopened: bool
    """The job had completed and is running again."""


@dataclass(frozen=True)
class RoundSummary:
    round: int
    jobs: Mapping[int, JobRoundResult]
    quarantined: tuple[Quarantine, ...] = ()
    """Previous checkpoints found damaged while closing this round (set aside; the copies'
    parameters were still averaged, only integer counters restarted from the copies')."""


def as_int(value: Any, what: str, error: type[Exception]) -> int:
    if isinstance(value, bool):
        raise error(f"{what}: expected an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise error(f"{what}: expected an integer, got {value!r}") from None


ReportItem = tuple[int, str, int, float, "str | os.PathLike[str]", str]
"""One copy's report for :meth:`JobTracker.report_many`: ``(copy_id, node, steps_done, seconds,
checkpoint_path, sha256)``."""


def as_id(value: Any) -> int | None:
    """``value`` as an integer id, None if it is not one (its report is refused later)."""
    try:
        return None if isinstance(value, bool) else operator.index(value)
    except TypeError:
        return None
