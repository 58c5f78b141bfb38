"""What the tracker's state says: jobs, their progress and copies, a closed round's summary."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection
from pathlib import Path

from tracker.base import TrackerBase
from tracker.errors import RoundError
from tracker.records import CheckpointRef, JobRoundResult, JobState, Report, RoundSummary


class Summaries(TrackerBase):
    """Read-only queries of the tracker's state."""

    def job_state(self, job_id: int) -> JobState:
        with self._mutex:
            return self._state(self._job_row(job_id), self.active_copies(job_id))

    def job_states(self, job_ids: Collection[int] | None = None) -> dict[int, JobState]:
        """:meth:`job_state` of these jobs (of every job with None) in two queries;
        UnknownJobError for one not registered."""
        with self._mutex:
            rows = self._store.jobs_by_id(job_ids)
            for job_id in job_ids or ():
                if job_id not in rows:
                    self._job_row(job_id)  # raises UnknownJobError
            active = self._store.active_copies_of(rows)
            return {j: self._state(row, active[j]) for j, row in sorted(rows.items())}

    def _state(self, row: sqlite3.Row, active: list[int]) -> JobState:
        return JobState(
            int(row["job_id"]),
            int(row["target_steps"]),
            int(row["steps_done"]),
            bool(row["completed"]),
            row["model"],
            row["size"],
            self._ref(row["ckpt_path"], row["ckpt_sha256"], row["ckpt_round"]),
            tuple(active),
        )

    def steps_audit(self) -> dict[int, tuple[int, int]]:
        """The audit trail per job: (steps its consolidations added, steps its rollbacks
        removed); the difference is its ``steps_done``."""
        with self._mutex:
            return self._store.steps_audit()

    def jobs(self) -> list[JobState]:
        return list(self.job_states().values())

    def progress(self) -> dict[int, int]:
        """``{job_id: steps_done}`` for every registered job."""
        with self._mutex:
            return {int(r["job_id"]): int(r["steps_done"]) for r in self._store.jobs()}

    def completed_jobs(self) -> set[int]:
        """Ids of the jobs that are complete (one query, for checks every round)."""
        with self._mutex:
            return self._store.completed_jobs()

    def latest_checkpoint(self, job_id: int) -> CheckpointRef | None:
        """The job's latest consolidated checkpoint (or its initial one), None if it has none."""
        return self.job_state(job_id).checkpoint

    def is_complete(self, job_id: int) -> bool:
        return self.job_state(job_id).completed

    def active_copies(self, job_id: int) -> list[int]:
        """Ids of the job's copies that are not discarded (none once the job is complete)."""
        with self._mutex:
            self._job_row(job_id)
            return [int(r["copy_id"]) for r in self._store.copies(job_id) if not r["discarded"]]

    def current_round(self) -> int | None:
        """The open round, or None."""
        with self._mutex:
            return self._store.open_round()

    def last_closed_round(self) -> int | None:
        with self._mutex:
            row = self._store.conn.execute(
                "SELECT MAX(round) AS r FROM rounds WHERE state = 'closed'"
            ).fetchone()
            return None if row["r"] is None else int(row["r"])

    def reports(self, round_: int) -> list[Report]:
        """The accepted reports of a round, by copy id."""
        with self._mutex:
            return [
                Report(
                    int(x["round"]),
                    int(x["copy_id"]),
                    int(x["job_id"]),
                    x["node"],
                    int(x["steps"]),
                    float(x["seconds"]),
                    Path(x["ckpt_path"]),
                    x["ckpt_sha256"],
                )
                for x in self._store.reports(round_)
            ]

    def round_summary(self, round_: int) -> RoundSummary:
        """The stored summary of a closed round (RoundError if it is not closed)."""
        with self._mutex:
            if self._store.round_state(round_) != "closed":
                raise RoundError(f"round {round_} is not closed")
            copies: dict[int, list[int]] = {}
            for x in self._store.reports(round_):
                copies.setdefault(int(x["job_id"]), []).append(int(x["copy_id"]))
            jobs = {}
            for row in self._store.consolidations(round_):
                j = int(row["job_id"])
                jobs[j] = JobRoundResult(
                    j,
                    tuple(copies.get(j, ())),
                    int(row["steps_reported"]),
                    int(row["steps_added"]),
                    int(row["steps_total"]),
                    bool(row["completed"]),
                    self._ref(row["ckpt_path"], row["ckpt_sha256"], row["ckpt_round"]),
                )
            return RoundSummary(round_, jobs)

    # -- queries ---------------------------------------------------------------------------
