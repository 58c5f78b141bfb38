"""Checkpoints verified at rest: a job whose latest file is missing or damaged is rolled back to
its newest good checkpoint."""

from __future__ import annotations

from collections.abc import Collection

from tracker.checkpoints import verify_file
from tracker.crashpoints import crash_point
from tracker.errors import CheckpointError, RoundError
from tracker.records import CheckpointRef, Rollback
from tracker.retention import Retention
from tracker.summaries import Summaries


class Rollbacks(Retention, Summaries):
    """Verifying the jobs' latest checkpoints and rolling back the damaged ones."""

    # -- verification at rest and rollback ---------------------------------------------------
    def verified_checkpoint(self, job_id: int) -> tuple[CheckpointRef | None, Rollback | None]:
        """The job's latest checkpoint after checking it against its recorded sha256.

        A missing or damaged file is quarantined and the job rolled back to its newest
        checkpoint that verifies (or to its initial state, steps 0, when none does): its
        ``steps_done``, checkpoint and completed flag change in one transaction. Returns the
        checkpoint to use and the rollback (None when the latest file was good). Raises
        RoundError if the job has reports in the open round (roll back between rounds only).
        """
        with self._mutex:
            job = self._job_row(job_id)
            rel, sha = job["ckpt_path"], job["ckpt_sha256"]
            latest = self._ref(rel, sha, job["ckpt_round"])
            if latest is None:
                return None, None
            what = f"job {job_id}"
            try:
                verify_file(latest.path, latest.sha256, what)
                return latest, None
            except CheckpointError as exc:
                problem = str(exc)
            open_r = self._store.open_round()
            if open_r is not None and any(
                int(x["job_id"]) == job_id for x in self._store.reports(open_r)
            ):
                raise RoundError(f"{what}: {problem}; it has reports in open round {open_r}")
            bad = [self._quarantine(job_id, rel, problem)]
            target: tuple[CheckpointRef, int] | None = None
            for cand in list(self._store.checkpoint_history(job_id)):
                if cand["path"] == rel:
                    continue
                ref = CheckpointRef(self._abs(cand["path"]), cand["sha256"], cand["round"])
                if not ref.path.exists():
                    continue  # pruned earlier or already quarantined
                try:
                    verify_file(ref.path, ref.sha256, what)
                except CheckpointError as exc:
                    bad.append(self._quarantine(job_id, cand["path"], str(exc)))
                    continue
                target = (ref, cand["steps"])
                break
            restored, steps = target if target is not None else (None, 0)
            with self._store.transaction():
                self._store.set_job_progress(
                    job_id,
                    steps,
                    False,
                    None
                    if restored is None
                    else str(restored.path.relative_to(self.checkpoint_dir)),
                    None if restored is None else restored.sha256,
                    None if restored is None else restored.round,
                )
                self._store.reopen_job(job_id)
                self._store.insert_rollback(
                    job_id, self._store.last_round(), int(job["steps_done"]), steps, problem
                )
                crash_point("rollback:in_tx")
            return restored, Rollback(
                job_id, tuple(bad), int(job["steps_done"]), steps, restored, bool(job["completed"])
            )

    def verified_checkpoints(
        self, job_ids: Collection[int]
    ) -> dict[int, tuple[CheckpointRef | None, Rollback | None]]:
        """:meth:`verified_checkpoint` of each job (their rows read in one query; a job whose
        latest file fails the check is rolled back as there)."""
        with self._mutex:
            rows = self._store.jobs_by_id(job_ids)
            out: dict[int, tuple[CheckpointRef | None, Rollback | None]] = {}
            for job_id in job_ids:
                row = rows.get(job_id)
                if row is None:
                    self._job_row(job_id)  # raises UnknownJobError
                    continue
                latest = self._ref(row["ckpt_path"], row["ckpt_sha256"], row["ckpt_round"])
                try:
                    if latest is not None:
                        verify_file(latest.path, latest.sha256, f"job {job_id}")
                    out[job_id] = (latest, None)
                except CheckpointError:
                    out[job_id] = self.verified_checkpoint(job_id)
            return out

    def verify_checkpoints(self) -> list[str]:
        """Problems with the jobs' latest checkpoint files (missing or sha256 mismatch)."""
        problems = []
        for st in self.jobs():
            if st.checkpoint is not None:
                try:
                    verify_file(st.checkpoint.path, st.checkpoint.sha256, f"job {st.job_id}")
                except CheckpointError as exc:
                    problems.append(str(exc))
        return problems
