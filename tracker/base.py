"""What every part of the Job Tracker shares: its store, its lock, its settings and the paths of
the checkpoints it owns."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tracker.errors import UnknownJobError
from tracker.records import CheckpointRef, as_int
from tracker.store import Store

CLOSED = -1
NO_LOCK = -2
"""``_lock_fd`` of a tracker opened read-only (it holds no lock)."""


class TrackerBase:
    """The state the tracker's parts work on (see :class:`tracker.tracker.JobTracker`)."""

    def __init__(self, store: Store, checkpoint_dir: Path, lock_fd: int) -> None:
        self._store = store
        self.checkpoint_dir = checkpoint_dir
        self._lock_fd = lock_fd
        self._mutex = store.db.lock
        """One lock with the state file's other users (a run's journal and event log)."""
        meta = store.meta()
        self.max_job_count = int(meta["max_job_count"])
        self.averaging = meta["averaging"]
        self.keep_history = meta["keep_history"] == "1"
        self.keep_checkpoints = int(meta.get("keep_checkpoints", "1"))  # older databases: 1

    # -- paths -----------------------------------------------------------------------------
    def _abs(self, rel: str) -> Path:
        return self.checkpoint_dir / rel

    def _ref(self, rel: str | None, sha: str | None, round_: int | None) -> CheckpointRef | None:
        return None if rel is None or sha is None else CheckpointRef(self._abs(rel), sha, round_)

    def _job_row(self, job_id: int) -> sqlite3.Row:
        row = self._store.job(as_int(job_id, "job_id", UnknownJobError))
        if row is None:
            raise UnknownJobError(f"job {job_id} is not registered")
        return row
