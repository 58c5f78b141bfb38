"""What every part of the Job Tracker shares: its store, its lock, its settings and the paths of
the checkpoints it owns."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path, PurePosixPath

from tracker.errors import UnknownJobError
from tracker.records import CheckpointRef, as_int
from tracker.store import Store

OWNED_NAME_RE = re.compile(r"^(initial|round-\d+)-[0-9a-f]{64}\.pt$")
"""The file name of a checkpoint the tracker wrote (``job-N/<name>`` under its folder)."""
_JOB_DIR_RE = re.compile(r"^job-\d+$")

CLOSED = -1
NO_LOCK = -2
"""``_lock_fd`` of a tracker opened read-only (it holds no lock)."""


def is_owned_path(rel: object) -> bool:
    """Whether ``rel`` is a path the tracker writes for its checkpoints: ``job-N/<name>``, no
    other component (so never absolute, never ``..``)."""
    if not isinstance(rel, str):
        return False
    parts = PurePosixPath(rel).parts
    return (
        len(parts) == 2
        and _JOB_DIR_RE.match(parts[0]) is not None
        and OWNED_NAME_RE.match(parts[1]) is not None
    )


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
        """The owned checkpoint ``rel`` (``job-N/<name>``, as the tracker records it) under the
        checkpoint folder; ValueError for any other path (a state file edited to name a file
        elsewhere: quarantining it would move that file into the run)."""
        if not is_owned_path(rel):
            raise ValueError(
                f"checkpoint path {str(rel)[:80]!r} is not one the tracker writes (job-N/<name>)"
            )
        return self.checkpoint_dir / rel

    def _check_stored_paths(self) -> None:
        """ValueError unless every checkpoint path the state file records is one the tracker
        writes (:meth:`_abs`): checked before anything is deleted or moved by those paths."""
        for rel in self._store.recorded_paths():
            self._abs(rel)

    def _ref(self, rel: str | None, sha: str | None, round_: int | None) -> CheckpointRef | None:
        return None if rel is None or sha is None else CheckpointRef(self._abs(rel), sha, round_)

    def _job_row(self, job_id: int) -> sqlite3.Row:
        row = self._store.job(as_int(job_id, "job_id", UnknownJobError))
        if row is None:
            raise UnknownJobError(f"job {job_id} is not registered")
        return row
