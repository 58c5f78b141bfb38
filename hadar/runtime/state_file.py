"""A run directory's one state file, ``state.sqlite``: the Job Tracker's tables, the journal's
and the event log's, in one SQLite database written through one connection, so that a round's
commit point is one transaction.

Opening it refuses what would lose history silently: a run directory of the older layout
(``journal.sqlite`` + ``tracker.sqlite``), and a state file emptied or replaced by a new one
beside checkpoints of rounds it has no record of.
"""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hadar.core.errors import InputError
from hadar.core.safe_paths import regular_files
from hadar.core.state_db import StateDb, StateFileError

STATE_FILE = "state.sqlite"
EVENTS_FILE = "events.jsonl"
"""The event log as an output (lines for people and tools); never read back as state."""
OLDER_LAYOUT = ("journal.sqlite", "tracker.sqlite")
"""The state files of runs made before the one state file."""
_ROUND_CHECKPOINT = re.compile(r"^round-(\d+)-[0-9a-f]{64}\.pt$")


def state_path(rundir: Path) -> Path:
    return rundir / STATE_FILE


def open_run_state(rundir: Path, *, read_only: bool = False) -> StateDb:
    """The run's state file (created empty for a new run unless ``read_only``). One line, exit
    2, for a run directory of the older layout, a missing file (``read_only``) and a state file
    with no record of a run whose checkpoints are there."""
    path = state_path(rundir)
    older = [name for name in OLDER_LAYOUT if (rundir / name).exists()]
    if older and not path.exists():
        raise InputError(
            f"{rundir}: made by an older version of hadar (its state is in "
            f"{' and '.join(older)}, not {STATE_FILE}); this version cannot resume or report it: "
            "finish it with the version that started it, or start a new run with --out"
        )
    if read_only and not path.exists():
        raise InputError(f"{path}: no state file (not a run directory, or the run never started)")
    db = StateDb(path, read_only=read_only)
    last = last_checkpoint_round(rundir / "checkpoints")
    if last is not None and last > _last_known_round(db):
        db.close()
        raise StateFileError(
            f"{path}: has no record of round {last}, which {rundir / 'checkpoints'} holds "
            "a checkpoint of (the file was truncated or replaced)"
        )
    return db


def _last_known_round(db: StateDb) -> int:
    """The latest round the state file records (opened or planned: a checkpoint of it may be on
    disk before its commit, after a crash); -1 with no tracker tables (a new run, or a file
    that lost them). A checkpoint of a later round means the file was replaced by an older
    one (a restored backup): resuming it would delete those checkpoints as orphans."""
    if not db.has_table("meta"):
        return -1
    known = -1
    for table in ("rounds", "run_rounds"):
        if db.has_table(table):
            with db.lock:
                row = db.conn.execute(f"SELECT MAX(round) FROM {table}").fetchone()
            if row is not None and isinstance(row[0], int):
                known = max(known, row[0])
    return known


@contextmanager
def reading_run_state(rundir: Path) -> Iterator[StateDb]:
    """The run's state file, to read (``hadar report``). While a run holds it (its lock,
    which the Job Tracker takes) it is opened read-only: no lock taken, nothing written. Else it
    is opened as its writer would, under the lock, so that closing it folds the write-ahead log
    back into the file (a read-only connection leaves ``-wal`` and ``-shm`` files behind)."""
    path = state_path(rundir)
    fd = -1
    if path.is_file() and path.stat().st_size == 0:  # opened as a writer, it would get a header
        raise StateFileError(
            f"{path}: an empty file, not a run's state; restore it from a backup or start a new run"
        )
    if path.is_file():
        fd = os.open(f"{path.resolve()}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            fd = -1
    try:
        db = open_run_state(rundir, read_only=fd < 0)
        try:
            yield db
        finally:
            db.close()
    finally:
        if fd >= 0:
            os.close(fd)


def last_checkpoint_round(checkpoints: Path) -> int | None:
    """The latest round a consolidated checkpoint under ``checkpoints/job-*/`` was written in
    (None if none; links are not followed)."""
    rounds = [
        int(m.group(1))
        for job_dir in regular_dirs(checkpoints)
        for f in regular_files(job_dir)
        if (m := _ROUND_CHECKPOINT.match(f.name))
    ]
    return max(rounds, default=None)


def regular_dirs(folder: Path) -> list[Path]:
    """The ``job-*`` folders directly in ``folder`` (not links)."""
    if not folder.is_dir() or folder.is_symlink():
        return []
    return sorted(p for p in folder.glob("job-*") if p.is_dir() and not p.is_symlink())
