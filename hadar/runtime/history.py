"""Per-job history of a real run, recomputed from the journal (plans, timings) and the Job
Tracker (what was counted): what policies need about the past (service, time per GPU type,
last placements) and what reports show (start, finish)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hadar.core.jobs import Job, JobStatus, Placement
from hadar.runtime.journal import RoundRow
from tracker.tracker import JobTracker


@dataclass
class JobHistory:
    attained: float = 0.0
    time_on_type: dict[str, float] = field(default_factory=dict)
    rounds: int = 0
    first_start: float | None = None
    finish: float | None = None


def copy_records(row: RoundRow, tracker: JobTracker) -> list[dict[str, Any]]:
    """The copies of a closed round with their outcome: from the journal's timings, or (for a
    round recovered after a crash before the journal recorded them) from the tracker's reports."""
    if row.timings.get("copies") is not None:
        return list(row.timings["copies"])
    reports = {rep.copy_id: rep for rep in tracker.reports(row.round)}
    out = []
    for a in row.plan:
        rep = reports.get(a["tracker_copy"])
        out.append(
            {
                "job": a["job"],
                "copy": a["copy"],
                "node": a["node"],
                "placement": a["placement"],
                "kind": "ok" if rep else "lost",
                "steps": rep.steps if rep else 0,
                "train_s": rep.seconds if rep else 0.0,
                "wall_s": rep.seconds if rep else 0.0,
            }
        )
    return out


def rebuild(
    jobs: Iterable[Job], rows: Iterable[RoundRow], tracker: JobTracker, started_at: float
) -> tuple[dict[int, JobHistory], dict[tuple[int, int], Placement]]:
    """Job histories and the last closed round's successful placements (for ``ctx.current``)."""
    hist = {j.job_id: JobHistory() for j in jobs}
    num_gpus = {j.job_id: j.num_gpus for j in jobs}
    current: dict[tuple[int, int], Placement] = {}
    for row in rows:
        if row.status != "closed":
            continue
        summary = tracker.round_summary(row.round)
        current = {}
        ran: set[int] = set()
        for c in copy_records(row, tracker):
            if c["kind"] != "ok" or c["job"] not in hist:
                continue
            h = hist[c["job"]]
            seconds = float(c["wall_s"])
            gpus = sum(sum(per.values()) for per in c["placement"].values())
            h.attained += (gpus or num_gpus[c["job"]]) * seconds
            for per in c["placement"].values():
                for gtype in per:
                    h.time_on_type[gtype] = h.time_on_type.get(gtype, 0.0) + seconds
            if c["steps"] > 0 and h.first_start is None:
                h.first_start = row.started - started_at
            ran.add(c["job"])
            current[(c["job"], c["copy"])] = c["placement"]
        for j in ran:
            hist[j].rounds += 1
        for job_id, res in summary.jobs.items():
            if res.completed and job_id in hist and hist[job_id].finish is None:
                hist[job_id].finish = (row.ended or row.started) - started_at
    done = {j for j, h in hist.items() if h.finish is not None}
    return hist, {k: v for k, v in current.items() if k[0] not in done}


def statuses(
    jobs: Iterable[Job], hist: Mapping[int, JobHistory], tracker: JobTracker
) -> list[JobStatus]:
    """Unfinished jobs as policies see them, ordered by (arrival, id)."""
    progress = tracker.progress()
    out = []
    for j in sorted(jobs, key=lambda j: (j.arrival, j.job_id)):
        h = hist[j.job_id]
        if tracker.is_complete(j.job_id):
            continue
        out.append(
            JobStatus(
                j,
                float(j.total_steps - progress.get(j.job_id, 0)),
                h.attained,
                dict(h.time_on_type),
                h.rounds,
                h.first_start,
            )
        )
    return out
