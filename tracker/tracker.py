"""The Job Tracker: copy registration, per-round reports, step aggregation and consolidation.

State lives in SQLite (:mod:`tracker.store`); consolidated checkpoints are files in the
checkpoint directory. Protocol of :meth:`JobTracker.close_round` (crash-safe, idempotent):

1. for each job with reports: load the copies' checkpoints (sha256 verified), average them,
   write the result to a temporary file, fsync, rename to ``job-<id>/round-<r>-<sha256>.pt``;
2. in ONE transaction: consolidation rows, jobs' steps/checkpoint/completed flags, discarded
   copies of completed jobs, round marked closed;
3. delete checkpoints that fell out of the retention window (each job keeps its latest and
   the ``keep_checkpoints - 1`` before it; every one with ``keep_history``).

Checkpoints are verified at rest as well as in transit: :meth:`JobTracker.verified_checkpoint`
checks a job's latest file against its recorded sha256 and, if it is missing or damaged, moves
it to ``<checkpoint_dir>/quarantine/`` and rolls the job back to its newest good checkpoint,
moving ``steps_done`` back in the same transaction (so steps are never counted without the
parameters that hold them).

A crash before step 2 commits leaves the round open (re-run ``close_round``); files written by
the interrupted attempt are unreferenced and removed by :meth:`JobTracker.open`. A crash after
it leaves the round closed; closing it again returns the stored summary.

:class:`JobTracker` is a façade over parts, one module each: :mod:`tracker.registration` (jobs
and copies), :mod:`tracker.reports` (rounds and the copies' step reports),
:mod:`tracker.consolidation` (closing a round: averaging, counting steps),
:mod:`tracker.rollback` (checkpoints verified at rest, rollback), :mod:`tracker.retention`
(which checkpoint files are kept, pruning, quarantine) and :mod:`tracker.summaries` (queries);
they share :class:`tracker.base.TrackerBase` (store, lock, settings). This module opens and
closes the tracker.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from hadar.core.state_db import StateDb
from tracker import ids
from tracker.averaging import MODES
from tracker.base import CLOSED, NO_LOCK
from tracker.consolidation import Consolidation
from tracker.errors import TrackerBusyError, TrackerConfigError
from tracker.records import CheckpointRef as CheckpointRef  # the API's value objects
from tracker.records import JobRoundResult as JobRoundResult
from tracker.records import JobState as JobState
from tracker.records import Quarantine as Quarantine
from tracker.records import Report as Report
from tracker.records import ReportItem as ReportItem
from tracker.records import Rollback as Rollback
from tracker.records import RoundSummary as RoundSummary
from tracker.registration import Registration
from tracker.reports import Reports
from tracker.rollback import Rollbacks
from tracker.store import SCHEMA_VERSION, Store

DEFAULT_KEEP_CHECKPOINTS = 2


class JobTracker(Registration, Reports, Consolidation, Rollbacks):
    """Crash-safe Job Tracker. Create with :meth:`open`; one process at a time per database."""

    # -- lifecycle -------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        db_path: str | os.PathLike[str] | StateDb,
        checkpoint_dir: str | os.PathLike[str],
        *,
        max_job_count: int | None = None,
        averaging: str | None = None,
        keep_history: bool | None = None,
        keep_checkpoints: int | None = None,
    ) -> JobTracker:
        """Open (creating if needed) the tracker at ``db_path``, checkpoints in ``checkpoint_dir``.
        ``db_path`` is a file of its own, or a :class:`~hadar.core.state_db.StateDb` shared with
        other tables (a run's ``state.sqlite``): the tracker's writes are then part of the
        owner's transactions when it holds one open, and the owner closes the file.

        Settings left None take the stored value (or the default for a new database:
        max_job_count=1000, averaging="steps", keep_history=False, keep_checkpoints=2); a value
        that contradicts the database raises TrackerConfigError. Removes orphaned temporary and
        unreferenced checkpoint files left by a crash.
        """
        shared = db_path if isinstance(db_path, StateDb) else None
        db = (db_path.path if isinstance(db_path, StateDb) else Path(db_path)).resolve()
        ckpt_dir = Path(checkpoint_dir).resolve()
        if max_job_count is not None:
            max_job_count = ids.check_max_job_count(max_job_count)
        if averaging is not None and averaging not in MODES:
            raise TrackerConfigError(f"averaging: {averaging!r} is not one of {', '.join(MODES)}")
        if keep_checkpoints is not None and (
            isinstance(keep_checkpoints, bool)
            or not isinstance(keep_checkpoints, int)
            or keep_checkpoints < 1
        ):
            raise TrackerConfigError(
                f"keep_checkpoints: must be an integer >= 1, got {keep_checkpoints!r}"
            )
        db.parent.mkdir(parents=True, exist_ok=True)
        ckpt_dir.mkdir(parents=True, exist_ok=True)
        lock_fd = os.open(f"{db}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock_fd)
            raise TrackerBusyError(
                f"{db}: the tracker database is open in another process (the run is going on "
                "there; wait for it to end, or read it with hadar report)"
            ) from None
        try:
            store = Store(shared if shared is not None else db)
            try:
                cls._check_meta(store, db, max_job_count, averaging, keep_history, keep_checkpoints)
                tracker = cls(store, ckpt_dir, lock_fd)
            except BaseException:
                store.close()
                raise
        except BaseException:
            os.close(lock_fd)
            raise
        try:
            tracker._check_stored_paths()  # before any file is deleted or moved by those paths
        except BaseException:
            tracker.close()
            raise
        tracker._remove_orphans()
        return tracker

    @classmethod
    def open_read_only(
        cls, db_path: str | os.PathLike[str] | StateDb, checkpoint_dir: str | os.PathLike[str]
    ) -> JobTracker:
        """Open an existing tracker only to read it, also while another process has it open
        (``hadar report`` on a live run): no lock taken, nothing written, no clean-up.
        ``db_path`` may be a shared :class:`~hadar.core.state_db.StateDb` opened read-only."""
        shared = db_path if isinstance(db_path, StateDb) else None
        db = (db_path.path if isinstance(db_path, StateDb) else Path(db_path)).resolve()
        if shared is None and not db.is_file():
            raise TrackerConfigError(f"{db}: no tracker database here")
        store = Store(shared, read_only=True) if shared is not None else Store(db, read_only=True)
        try:
            if not store.is_initialized():
                raise TrackerConfigError(f"{db}: not a tracker database (no meta table)")
            meta = store.meta()
            if meta.get("schema_version") != str(SCHEMA_VERSION):
                raise TrackerConfigError(
                    f"{db}: schema version {meta.get('schema_version')}, this tracker reads {SCHEMA_VERSION}"
                )
            return cls(store, Path(checkpoint_dir).resolve(), NO_LOCK)
        except BaseException:
            store.close()
            raise

    @staticmethod
    def _check_meta(
        store: Store,
        db: Path,
        max_job_count: int | None,
        averaging: str | None,
        keep_history: bool | None,
        keep_checkpoints: int | None,
    ) -> None:
        wanted = {
            "max_job_count": None if max_job_count is None else str(max_job_count),
            "averaging": averaging,
            "keep_history": None if keep_history is None else str(int(bool(keep_history))),
            "keep_checkpoints": None if keep_checkpoints is None else str(keep_checkpoints),
        }
        defaults = {
            "max_job_count": str(ids.DEFAULT_MAX_JOB_COUNT),
            "averaging": "steps",
            "keep_history": "0",
            "keep_checkpoints": str(DEFAULT_KEEP_CHECKPOINTS),
        }
        if not store.is_initialized():
            store.initialize({k: v if v is not None else defaults[k] for k, v in wanted.items()})
            return
        meta = store.meta()
        if meta.get("schema_version") != str(SCHEMA_VERSION):
            raise TrackerConfigError(
                f"{db}: schema version {meta.get('schema_version')}, this tracker reads {SCHEMA_VERSION}"
            )
        if "keep_checkpoints" not in meta:  # a database written before retention was a setting
            with store.transaction():
                store.set_meta("keep_checkpoints", wanted["keep_checkpoints"] or "1")
            meta = store.meta()
        for key, value in wanted.items():
            if value is not None and meta[key] != value:
                raise TrackerConfigError(f"{db}: {key} is {meta[key]} in the database, not {value}")

    def close(self) -> None:
        """Close the database and release the lock (idempotent)."""
        with self._mutex:
            if self._lock_fd == CLOSED:
                return
            self._store.close()
            if self._lock_fd >= 0:
                os.close(self._lock_fd)
            self._lock_fd = CLOSED

    def __enter__(self) -> JobTracker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
