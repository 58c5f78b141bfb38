"""A real run's bookkeeping of a round, in one place, in the order it happens.

1. Inside the round's commit transaction (:meth:`RoundExecutor.play
   <hadar.runtime.round_executor.RoundExecutor.play>`): the Job Tracker takes every copy's
   report and closes the round (steps counted, checkpoints averaged); each copy that trained is
   booked here by :meth:`RoundBook.measured` (its rate, and an elastic job's step/sync/gradient
   sample, to the online estimator); the journal records the timings.
2. Once the round has committed (:meth:`RoundBook.committed`, from ``Coordinator.execute``): the
   jobs' service and last placements (:class:`~hadar.runtime.run_state.RunState`) and the recent
   rounds the progress checks read (:class:`~hadar.runtime.run_state.ProgressWatch`).
3. After the round is recorded (``Coordinator.record``): :meth:`RoundBook.check_progress` gives
   up jobs without progress, withholds copies that fail on the same nodes, and stops a run
   without any progress.

A restarted coordinator books the rounds committed before it once (:meth:`RoundBook.replay`),
as steps 1 and 2 did when they ran.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from estimators.online import OnlineThroughput
from hadar.core.jobs import Job, Placement, placement_gpus
from hadar.runtime import elastic
from hadar.runtime.config import RunConfig
from hadar.runtime.faults import RunStalledError, likely_cause
from hadar.runtime.journal import EventLog, RoundRow
from hadar.runtime.run_state import ProgressWatch, RunState
from tracker.tracker import JobTracker

Note = Callable[[str], None]
"""Shows a line on the live view (nothing without one)."""


class RoundBook:
    """What the run keeps from its committed rounds, and the checks it makes on them."""

    def __init__(
        self,
        rundir: Path,
        cfg: RunConfig,
        jobs: Mapping[int, Job],
        throughput: OnlineThroughput,
        tracker: JobTracker,
        events: EventLog,
        note: Note,
    ) -> None:
        self.rundir, self.cfg, self.by_id = rundir, cfg, jobs
        self.throughput, self.tracker, self.events, self.note = throughput, tracker, events, note
        self.state = RunState(jobs, cfg.started_at)
        """Per-job service and last placements, loaded by :meth:`replay`, then kept up."""
        self.watch = ProgressWatch(cfg.stall_rounds)
        """This session's recent rounds, for the progress checks."""
        self.failed: dict[int, str] = {}
        """Jobs given up this session (no progress for ``stall_rounds`` rounds): job -> cause."""
        self.withheld: dict[tuple[int, tuple[str, ...]], str] = {}
        """(job, nodes) not dispatched again this session: its copy there failed the same way
        ``stall_rounds`` rounds in a row -> why."""

    # -- 1. in the commit transaction ---------------------------------------------------------
    def observe(
        self, job_id: int, node: str, steps: int, train_s: float, placement: Placement
    ) -> None:
        """A measured rate, at the GPU count it ran on (an elastic job's varies)."""
        if steps > 0 and train_s > 0 and job_id in self.by_id:
            gpus = placement_gpus(placement)
            self.throughput.observe(self.by_id[job_id], node, gpus, steps / train_s)

    def measured(
        self,
        r: int,
        job_id: int,
        node: str,
        steps: int,
        train_s: float,
        placement: Placement,
        measured: Mapping[str, Any] | None,
    ) -> elastic.IterationSample | None:
        """Book a copy that trained: its rate and, for an elastic job, the sample of its
        iterations (returned, for the round's records)."""
        self.observe(job_id, node, steps, train_s, placement)
        sample = elastic.sample_of(r, placement, steps, measured)
        if sample is not None:
            self.throughput.observe_iterations(job_id, sample)
        return sample

    # -- 2. once the round has committed ------------------------------------------------------
    def committed(
        self, row: RoundRow, copies: list[dict[str, Any]], completed: Iterable[int]
    ) -> None:
        """Book a committed round: the jobs' service and placements, the progress watch."""
        self.state.commit(row, copies, completed)
        self.watch.add(copies)

    def replay(self, row: RoundRow, copies: list[dict[str, Any]]) -> None:
        """Book a round committed before this session (after a restart): its rates, samples
        and service, read back from the journal and the tracker."""
        for c in copies:
            self.observe(c["job"], c["node"], c["steps"], c["train_s"], c["placement"])
            if c.get("iterations"):
                self.throughput.observe_iterations(
                    c["job"], elastic.IterationSample.from_json(c["iterations"])
                )
        summary = self.tracker.round_summary(row.round)
        self.state.commit(row, copies, [j for j, s in summary.jobs.items() if s.completed])

    # -- 3. after the round is recorded -------------------------------------------------------
    def check_progress(self, r: int) -> None:
        """Give up jobs without progress for ``stall_rounds`` rounds; stop a run without any."""
        n = self.cfg.stall_rounds
        stuck = self.watch.run_stalled()
        if stuck is not None:
            cause = likely_cause(stuck, self.cfg.round_s, self.cfg.warm_workers)
            self.events.emit("stalled", round=r, rounds=n, cause=cause)
            raise RunStalledError(
                f"{self.rundir}: no job made progress in {n} rounds in a row; likely cause: "
                f"{cause}. State saved; fix it and continue with: hadar run --resume {self.rundir}"
            )
        for job, copies in self.watch.stalled_jobs().items():
            if job in self.failed or self.tracker.is_complete(job):
                continue
            cause = likely_cause(copies, self.cfg.round_s, self.cfg.warm_workers)
            self.failed[job] = cause
            self.events.emit(
                "job-failed",
                round=r,
                job=job,
                rounds=n,
                cause=cause,
                note="not dispatched again in this session; the other jobs go on",
            )
            self.note(f"job {job} given up after {n} rounds without progress: {cause}")
        for (job, nodes), copies in self.watch.repeated_failures().items():
            if (job, nodes) in self.withheld or job in self.failed or self.tracker.is_complete(job):
                continue
            kind, cause = (
                copies[-1].get("kind"),
                likely_cause(copies, self.cfg.round_s, self.cfg.warm_workers),
            )
            self.withheld[(job, nodes)] = (
                f"job {job} failed on {'+'.join(nodes)} ({kind}) {n} rounds in a row: {cause}"
            )
            self.events.emit(
                "copy-withheld",
                round=r,
                job=job,
                nodes=list(nodes),
                rounds=n,
                kind=kind,
                cause=cause,
                note="not dispatched on these nodes again in this session; the job goes on elsewhere",
            )
            self.note(self.withheld[(job, nodes)] + "; not dispatched there again")
