"""The coordinator's checkpoint guard and evaluator.

:class:`CheckpointGuard` checks a job's checkpoint against its recorded sha256 (the Job Tracker
quarantines a damaged one and rolls the job back) and logs what it did. :class:`Evaluator`
scores each finished job's final model on its held-out split once, on a node that is up; the
jobs already scored are read from the state file's events once per session and then kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hadar.core.cluster import Cluster
from hadar.core.jobs import Job
from hadar.runtime.config import RunConfig
from hadar.runtime.dispatch import evaluate_checkpoint
from hadar.runtime.gpu_binding import eval_env
from hadar.runtime.journal import EventLog
from hadar.runtime.node_manager import NodeManager
from tracker.crashpoints import crash_point
from tracker.tracker import CheckpointRef, JobTracker, Quarantine, Rollback

Note = Callable[[str], None]
"""Shows a line to the user (the live view's ``note``), or does nothing."""


class CheckpointGuard:
    """Verified checkpoints, with every quarantine and rollback in the event log."""

    def __init__(self, tracker: JobTracker, events: EventLog, note: Note) -> None:
        self.tracker, self.events, self.note = tracker, events, note

    def verified(self, job_id: int, r: int | None) -> CheckpointRef | None:
        """The job's checkpoint checked against its recorded sha256, rolled back if damaged."""
        ref, rb = self.tracker.verified_checkpoint(job_id)
        if rb is not None:
            self._log_rollback(rb, r)
        return ref

    def verified_all(self, job_ids: Sequence[int], r: int | None) -> None:
        """:meth:`verified` of every job (their rows read in one query)."""
        for rb in (rb for _, rb in self.tracker.verified_checkpoints(job_ids).values() if rb):
            self._log_rollback(rb, r)

    def log_quarantine(self, q: Quarantine, r: int | None) -> None:
        self.events.emit(
            "quarantine",
            round=r,
            job=q.job_id,
            path=str(q.path),
            moved_to=None if q.moved_to is None else str(q.moved_to),
            reason=q.reason,
        )

    def _log_rollback(self, rb: Rollback, r: int | None) -> None:
        for q in rb.quarantined:
            self.log_quarantine(q, r)
        to = (
            "its initial state"
            if rb.checkpoint is None
            else f"checkpoint of round {rb.checkpoint.round}"
        )
        self.events.emit(
            "rollback",
            round=r,
            job=rb.job_id,
            from_steps=rb.from_steps,
            to_steps=rb.to_steps,
            steps_removed=rb.from_steps - rb.to_steps,
            reopened=rb.reopened,
            checkpoint=None if rb.checkpoint is None else str(rb.checkpoint.path),
            note=f"damaged checkpoint quarantined; job {rb.job_id} continues from {to}",
        )
        self.note(
            f"job {rb.job_id}: damaged checkpoint quarantined, rolled back from "
            f"{rb.from_steps} to {rb.to_steps} steps ({to})"
        )


class Evaluator:
    """Scores finished jobs' final models (``cfg.evaluate``), each once."""

    def __init__(
        self,
        rundir: Path,
        cfg: RunConfig,
        jobs: Sequence[Job],
        tracker: JobTracker,
        events: EventLog,
        nodes: NodeManager,
        guard: CheckpointGuard,
    ) -> None:
        self.rundir, self.cfg, self.jobs = rundir, cfg, {j.job_id: j for j in jobs}
        self.tracker, self.events, self.nodes, self.guard = tracker, events, nodes, guard
        self.tried: set[int] = set()
        self._scored: set[int] | None = None

    def scored(self) -> set[int]:
        """Jobs whose final model was scored (the event log is read on the first call)."""
        if self._scored is None:
            self._scored = {e["job"] for e in self.events.read(("evaluation",)) if e.get("metric")}
        return self._scored

    def pending(self, scored: set[int] | None = None) -> list[int]:
        """The finished jobs not yet scored nor tried in this session (none when the run does
        not score its models)."""
        if not self.cfg.evaluate:
            return []
        scored = self.scored() if scored is None else scored
        complete = self.tracker.completed_jobs()
        return [j for j in self.jobs if j not in scored and j not in self.tried and j in complete]

    def evaluate_pending(self, r: int, cluster: Cluster | None = None) -> bool:
        """Score every finished job not yet scored (also after a restart: an interrupted
        evaluation is redone). Returns False if a finished job's checkpoint was damaged and the
        job rolled back to train again."""
        scored = self.scored()
        all_good = True
        for job_id in self.pending(scored):
            ckpt = self.guard.verified(job_id, r)
            if not self.tracker.is_complete(job_id):
                all_good = False
                continue
            if ckpt is None:
                continue
            cluster = cluster or self.nodes.available(r)
            self.tried.add(job_id)
            node = cluster.node_names[0]
            metric = self._score(job_id, node, ckpt)
            crash_point("evaluate:computed")
            self.events.emit("evaluation", sync=True, job=job_id, node=node, metric=metric)
            if metric:
                scored.add(job_id)
            crash_point("evaluate:scored")
        return all_good

    def _score(self, job_id: int, node: str, ckpt: CheckpointRef) -> dict[str, Any] | None:
        return evaluate_checkpoint(
            self.nodes.provider,
            node,
            self.jobs[job_id],
            ckpt.path,
            ckpt.sha256,
            self.rundir / "incoming" / "eval",
            timeout_s=max(60.0, self.cfg.round_s * 4),
            warm=self.cfg.warm_workers,
            env=eval_env(self.nodes.gpus.get(node)),
        )
