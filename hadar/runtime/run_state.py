"""A real run's bookkeeping, in memory and updated once per committed round: what policies
need about the past (each job's :class:`~hadar.core.job_service.JobService`, last round's
placements), the GPU binding of the last round, and the recent rounds the progress checks look
at. It is read from the journal and the Job Tracker once, when the coordinator starts (after a
crash or ``--resume`` too), and never re-read: a round costs the same at round 10,000 as at
round 100."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hadar.core.job_service import JobService
from hadar.core.jobs import Job, JobStatus, Placement, placement_gpus
from hadar.runtime.faults import (
    Copy,
    placement_nodes,
    repeated_failures,
    run_stalled,
    stalled_jobs,
)
from hadar.runtime.journal import RoundRow


@dataclass
class RunState:
    """Per-job service, last round's successful placements and plan, from committed rounds."""

    jobs: Mapping[int, Job]
    started_at: float
    service: dict[int, JobService] = field(default_factory=dict)
    current: dict[tuple[int, int], Placement] = field(default_factory=dict)
    """Last committed round's successful placements (``ctx.current``), finished jobs left out."""
    last_plan: list[dict[str, Any]] | None = None
    """The plan rows of the last committed round (its GPU binding is kept where possible)."""

    def __post_init__(self) -> None:
        for job_id in self.jobs:
            self.service.setdefault(job_id, JobService())

    def commit(self, row: RoundRow, copies: Sequence[Copy], completed: Iterable[int]) -> None:
        """Book one committed round: its copies' outcomes and the jobs it completed."""
        self.current = {}
        ran: set[int] = set()
        for c in copies:
            if c["kind"] != "ok" or c["job"] not in self.service:
                continue
            s = self.service[c["job"]]
            seconds = float(c["wall_s"])
            gpus = placement_gpus(c["placement"])
            s.charge(
                gpus or self.jobs[c["job"]].num_gpus,
                seconds,
                [gtype for per in c["placement"].values() for gtype in per],
            )
            if c["steps"] > 0 and s.first_start is None:
                s.first_start = row.started - self.started_at
            ran.add(c["job"])
            self.current[(c["job"], c["copy"])] = c["placement"]
        for j in ran:
            self.service[j].rounds += 1
        for j in completed:
            if j in self.service and self.service[j].finish is None:
                self.service[j].finish = (row.ended or row.started) - self.started_at
        done = {j for j, s in self.service.items() if s.finish is not None}
        self.current = {k: v for k, v in self.current.items() if k[0] not in done}
        self.last_plan = row.plan

    def statuses(
        self, progress: Mapping[int, int], complete: set[int], skip: set[int], now: float
    ) -> list[JobStatus]:
        """Unfinished, arrived jobs not in ``skip`` as policies see them, by (arrival, id)."""
        return [
            self.service[j.job_id].status(j, float(j.total_steps - progress.get(j.job_id, 0)))
            for j in sorted(self.jobs.values(), key=lambda j: (j.arrival, j.job_id))
            if j.job_id not in complete and j.job_id not in skip and j.arrival <= now
        ]


@dataclass
class ProgressWatch:
    """This session's recent rounds, as much of them as the progress checks
    (:mod:`hadar.runtime.faults`) read: the last ``n`` rounds that dispatched anything, each
    job's last ``n`` rounds with a copy of it, each (job, nodes)'s last ``n`` dispatches."""

    n: int
    busy: deque[list[Copy]] = field(init=False)
    by_job: dict[int, deque[list[Copy]]] = field(default_factory=dict)
    by_pair: dict[tuple[int, tuple[str, ...]], deque[list[Copy]]] = field(default_factory=dict)
    latest: list[Copy] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.busy = deque(maxlen=self.n)

    def add(self, copies: Sequence[Copy]) -> None:
        """Book a committed round's copies."""
        self.latest = list(copies)
        if copies:
            self.busy.append(list(copies))
        jobs: dict[int, list[Copy]] = {}
        pairs: dict[tuple[int, tuple[str, ...]], list[Copy]] = {}
        for c in copies:
            jobs.setdefault(int(c["job"]), []).append(c)
            if c.get("kind") != "withheld":
                pairs.setdefault((int(c["job"]), placement_nodes(c["placement"])), []).append(c)
        for j, cs in jobs.items():
            self.by_job.setdefault(j, deque(maxlen=self.n)).append(cs)
        for key, cs in pairs.items():
            self.by_pair.setdefault(key, deque(maxlen=self.n)).append(cs)

    def run_stalled(self) -> list[Copy] | None:
        """The copies of the last ``n`` busy rounds if none progressed (else None)."""
        return run_stalled(list(self.busy), self.n)

    def stalled_jobs(self) -> dict[int, list[Copy]]:
        """Jobs of the latest round whose last ``n`` rounds made no progress (a job that did not
        run in it was checked, with the same rounds, when it last ran)."""
        out: dict[int, list[Copy]] = {}
        for j in dict.fromkeys(int(c["job"]) for c in self.latest):
            out.update(stalled_jobs(list(self.by_job.get(j, ())), self.n))
        return out

    def repeated_failures(self) -> dict[tuple[int, tuple[str, ...]], list[Copy]]:
        """(job, nodes) of the latest round that failed the same way ``n`` times in a row."""
        out: dict[tuple[int, tuple[str, ...]], list[Copy]] = {}
        keys = dict.fromkeys(
            (int(c["job"]), placement_nodes(c["placement"]))
            for c in self.latest
            if c.get("kind") != "withheld"
        )
        for key in keys:
            out.update(repeated_failures(list(self.by_pair.get(key, ())), self.n))
        return out
