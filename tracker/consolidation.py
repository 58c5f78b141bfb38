"""Closing a round: the copies' checkpoints averaged into the job's next one, the steps counted,
in one transaction (protocol in :mod:`tracker.tracker`)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from tracker.averaging import average_optimizer_states, average_state_dicts
from tracker.checkpoints import load_checkpoint, make_payload, save_atomic
from tracker.crashpoints import crash_point
from tracker.errors import CheckpointError, RoundError
from tracker.records import JobRoundResult, Quarantine, Report, RoundSummary, as_int
from tracker.retention import Retention
from tracker.summaries import Summaries


class Consolidation(Retention, Summaries):
    """Aggregating and consolidating a round's reports."""

    def close_round(self, round_: int) -> RoundSummary:
        """Aggregate and consolidate the open round ``round_`` and close it (protocol in the
        module docstring). Closing an already-closed round returns its stored summary."""
        with self._mutex:
            r = as_int(round_, "round", RoundError)
            state = self._store.round_state(r)
            if state == "closed":
                return self.round_summary(r)
            if state is None:
                raise RoundError(f"round {r} was never opened")
            by_job: dict[int, list[Report]] = {}
            for rep in self.reports(r):
                by_job.setdefault(rep.job_id, []).append(rep)
            written: list[Path] = []
            rows = self._store.jobs_by_id(by_job)
            try:
                plans = [
                    self._consolidate(r, rows[j], reps, written)
                    for j, reps in sorted(by_job.items())
                ]
                with self._store.transaction():
                    self._store.close_jobs(r, plans)
                    self._store.set_round_closed(r)
                    crash_point("close:in_tx")
            except BaseException:
                for f in written:
                    f.unlink(missing_ok=True)
                raise
            pruned = [] if self.keep_history else [plan["row"]["job_id"] for plan in plans]
            # once the round's close is committed (at once, or with the transaction of the
            # state file's owner that holds this one): checkpoints it made obsolete go
            self._store.db.after_commit(lambda: self._after_close(pruned))
            jobs = {
                c["job_id"]: JobRoundResult(
                    c["job_id"],
                    tuple(x.copy_id for x in by_job[c["job_id"]]),
                    c["steps_reported"],
                    c["steps_added"],
                    c["steps_total"],
                    bool(c["completed"]),
                    self._ref(c["path"], c["sha256"], c["ckpt_round"]),
                )
                for c in (plan["row"] for plan in plans)
            }  # what round_summary(r) reads back, without reading it
            quarantined = tuple(q for plan in plans for q in plan["quarantined"])
            return RoundSummary(r, jobs, quarantined)

    def _after_close(self, job_ids: list[int]) -> None:
        crash_point("close:committed")
        if job_ids:
            self._prune(job_ids)
        crash_point("close:pruned")

    def _consolidate(
        self, r: int, job: sqlite3.Row, reps: list[Report], written: list[Path]
    ) -> dict[str, Any]:
        """Average one job's reports into a new checkpoint file; return the rows to commit."""
        job_id = int(job["job_id"])
        reported = sum(x.steps for x in reps)
        added = min(reported, job["target_steps"] - job["steps_done"])
        total = job["steps_done"] + added
        completed = total >= job["target_steps"]
        rel, sha = job["ckpt_path"], job["ckpt_sha256"]
        quarantined: list[Quarantine] = []
        if reported > 0:
            what = f"round {r} job {job_id}"
            base = None
            if rel is not None:
                try:
                    base = load_checkpoint(self._abs(rel), sha, f"{what} previous checkpoint")[
                        "state_dict"
                    ]
                except CheckpointError as exc:
                    # damaged at rest since the copies were sent a verified copy of it: their
                    # parameters hold every step, only integer counters lose their base
                    quarantined.append(self._quarantine(job_id, rel, str(exc)))
            loaded = [
                (load_checkpoint(x.checkpoint, x.sha256, f"round {r} copy {x.copy_id}"), x.steps)
                for x in reps
                if x.steps > 0
            ]
            state = average_state_dicts(
                [(p["state_dict"], s) for p, s in loaded], self.averaging, base
            )
            optim = average_optimizer_states(
                [(p.get("optimizer"), s) for p, s in loaded], self.averaging
            )
            del loaded, base
            crash_point("close:averaged")
            payload = make_payload(state, optim, total, job["model"], job["size"])
            final, sha = save_atomic(
                payload,
                self.checkpoint_dir / f"job-{job_id}",
                lambda h: f"round-{r:06d}-{h}.pt",
                "close",
            )
            written.append(final)
            rel = f"job-{job_id}/{final.name}"
        ckpt_round = r if reported > 0 else job["ckpt_round"]
        return {
            "row": {
                "job_id": job_id,
                "copies": len(reps),
                "steps_reported": reported,
                "steps_added": added,
                "steps_total": total,
                "completed": completed,
                "path": rel,
                "sha256": sha,
                "ckpt_round": ckpt_round,
            },
            "job": {
                "job_id": job_id,
                "steps_done": total,
                "completed": completed,
                "path": rel,
                "sha256": sha,
                "ckpt_round": ckpt_round,
            },
            "quarantined": quarantined,
        }
