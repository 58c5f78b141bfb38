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
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import operator
import os
import re
import sqlite3
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hadar.core.integrity import SHA256_RE, sha256_file
from hadar.core.io import fsync_dir
from hadar.core.safe_paths import PathEscapeError, prune_files, rename_in
from hadar.core.state_db import StateDb
from tracker import ids
from tracker.averaging import (
    MODES,
    average_optimizer_states,
    average_state_dicts,
    signature,
    signature_difference,
)
from tracker.checkpoints import (
    TMP_PREFIX,
    copy_atomic,
    load_checkpoint,
    make_payload,
    save_atomic,
    verify_file,
)
from tracker.crashpoints import crash_point
from tracker.errors import (
    CheckpointError,
    CopyDiscardedError,
    DuplicateReportError,
    InvalidReportError,
    ParameterMismatchError,
    RegistrationError,
    ReportRejected,
    RoundError,
    StaleRoundError,
    TrackerBusyError,
    TrackerConfigError,
    UnknownCopyError,
    UnknownJobError,
)
from tracker.store import SCHEMA_VERSION, Store

OWNED_NAME_RE = re.compile(r"^(initial|round-\d+)-[0-9a-f]{64}\.pt$")
"""Names of checkpoint files the tracker owns inside ``<checkpoint_dir>/job-<id>/``."""
QUARANTINE_DIR = "quarantine"
"""Damaged checkpoints are moved to ``<checkpoint_dir>/quarantine/job-<id>/``."""
DEFAULT_KEEP_CHECKPOINTS = 2


@dataclass(frozen=True)
class CheckpointRef:
    """A consolidated checkpoint: absolute path, sha256, and the round that produced it
    (None for the job's registered initial checkpoint)."""

    path: Path
    sha256: str
    round: int | None


@dataclass(frozen=True)
class JobState:
    job_id: int
    target_steps: int
    steps_done: int
    completed: bool
    model: str | None
    size: str | None
    checkpoint: CheckpointRef | None
    active_copies: tuple[int, ...]

    @property
    def remaining_steps(self) -> int:
        return self.target_steps - self.steps_done


@dataclass(frozen=True)
class Report:
    round: int
    copy_id: int
    job_id: int
    node: str
    steps: int
    seconds: float
    checkpoint: Path
    sha256: str


@dataclass(frozen=True)
class JobRoundResult:
    """What a closed round did to one job."""

    job_id: int
    copies: tuple[int, ...]
    steps_reported: int
    steps_added: int
    steps_total: int
    completed: bool
    checkpoint: CheckpointRef | None


@dataclass(frozen=True)
class Quarantine:
    """A damaged or missing checkpoint set aside: where it was, where it went (None when it was
    missing), and why."""

    job_id: int
    path: Path
    moved_to: Path | None
    reason: str


@dataclass(frozen=True)
class Rollback:
    """A job moved back to its newest good checkpoint (``checkpoint`` None: its initial state)."""

    job_id: int
    quarantined: tuple[Quarantine, ...]
    from_steps: int
    to_steps: int
    checkpoint: CheckpointRef | None
    reopened: bool
    """The job had completed and is running again."""


@dataclass(frozen=True)
class RoundSummary:
    round: int
    jobs: Mapping[int, JobRoundResult]
    quarantined: tuple[Quarantine, ...] = ()
    """Previous checkpoints found damaged while closing this round (set aside; the copies'
    parameters were still averaged, only integer counters restarted from the copies')."""


def _int(value: Any, what: str, error: type[Exception]) -> int:
    if isinstance(value, bool):
        raise error(f"{what}: expected an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise error(f"{what}: expected an integer, got {value!r}") from None


ReportItem = tuple[int, str, int, float, "str | os.PathLike[str]", str]
"""One copy's report for :meth:`JobTracker.report_many`: ``(copy_id, node, steps_done, seconds,
checkpoint_path, sha256)``."""


def _as_id(value: Any) -> int | None:
    """``value`` as an integer id, None if it is not one (its report is refused later)."""
    try:
        return None if isinstance(value, bool) else operator.index(value)
    except TypeError:
        return None


CLOSED = -1
NO_LOCK = -2
"""``_lock_fd`` of a tracker opened read-only (it holds no lock)."""


class JobTracker:
    """Crash-safe Job Tracker. Create with :meth:`open`; one process at a time per database."""

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

    # -- paths -----------------------------------------------------------------------------
    def _abs(self, rel: str) -> Path:
        return self.checkpoint_dir / rel

    def _ref(self, rel: str | None, sha: str | None, round_: int | None) -> CheckpointRef | None:
        return None if rel is None or sha is None else CheckpointRef(self._abs(rel), sha, round_)

    def _retained(self, job_ids: Collection[int] | None = None) -> set[str]:
        """Owned checkpoints to keep: every job's latest and the ``keep_checkpoints - 1`` newest
        older ones still on disk (all of them with ``keep_history``); the older ones only of
        ``job_ids`` when given (the jobs whose directories are pruned)."""
        keep = self._store.referenced_paths(self.keep_history, job_ids)
        if self.keep_history or self.keep_checkpoints < 2:
            return keep
        for job in self._store.jobs_by_id(job_ids).values():
            latest, latest_round = job["ckpt_path"], job["ckpt_round"]
            if latest is None:
                continue
            if latest_round is None:
                continue
            older: list[str] = []
            for h in self._store.checkpoint_history(int(job["job_id"])):
                if len(older) >= self.keep_checkpoints - 1:
                    break  # newest first: the rest is outside the window
                if (
                    h["path"] != latest
                    and (h["round"] is None or h["round"] < latest_round)
                    and self._abs(h["path"]).exists()
                ):
                    older.append(h["path"])
            keep |= set(older)
        return keep

    def _remove_orphans(self) -> None:
        """Delete temp files and unreferenced owned checkpoints under ``job-*/`` directories."""
        keep = self._retained()
        for job_dir in sorted(self.checkpoint_dir.glob("job-*")):

            def doomed(name: str, d: str = job_dir.name) -> bool:
                owned = OWNED_NAME_RE.match(name) is not None
                return name.startswith(TMP_PREFIX) or (owned and f"{d}/{name}" not in keep)

            # a planted link is never followed, at any component of the path (a run refuses a
            # directory holding one before it opens the tracker; here it is left alone)
            with contextlib.suppress(PathEscapeError):
                prune_files(job_dir, doomed)

    # -- registration ----------------------------------------------------------------------
    def register_job(
        self,
        job_id: int,
        target_steps: int,
        model: str | None = None,
        size: str | None = None,
        initial_checkpoint: str | os.PathLike[str] | None = None,
        initial_sha256: str | None = None,
    ) -> JobState:
        """Register a job with its step target; idempotent when repeated with the same values.

        ``initial_checkpoint`` (a hadar-ckpt-1 file, optionally checked against
        ``initial_sha256``) is copied into the checkpoint directory and fixes the job's parameter
        signature; copies must start round one from it. Otherwise the first report fixes it.
        """
        with self._mutex:
            job_id = ids.check_job_id(job_id, self.max_job_count)
            target = _int(target_steps, f"job {job_id}: target_steps", RegistrationError)
            if target <= 0:
                raise RegistrationError(
                    f"job {job_id}: target_steps must be positive, got {target}"
                )
            for name, v in (("model", model), ("size", size)):
                if v is not None and not (isinstance(v, str) and v):
                    raise RegistrationError(f"job {job_id}: {name} must be a non-empty string")
            if initial_sha256 is not None and not SHA256_RE.match(str(initial_sha256).lower()):
                raise RegistrationError(f"job {job_id}: initial_sha256 is not a sha256 hex digest")
            what = f"job {job_id}"
            src = None if initial_checkpoint is None else Path(initial_checkpoint).resolve()
            sig_json = None
            sha = None if initial_sha256 is None else initial_sha256.lower()
            if src is not None:
                payload = load_checkpoint(src, sha, what)
                sha = sha or sha256_file(src)
                sig_json = json.dumps(signature(payload["state_dict"]))
                for name, given in (("model", model), ("size", size)):
                    stored = payload.get(name)
                    if given is not None and stored is not None and given != stored:
                        raise ParameterMismatchError(
                            f"{what}: initial checkpoint {src} is {name} {stored!r}, not {given!r}"
                        )
                model = model or payload.get("model")
                size = size or payload.get("size")
                del payload
            existing = self._store.job(job_id)
            if existing is not None:
                same = (
                    existing["target_steps"] == target
                    and model in (None, existing["model"])
                    and size in (None, existing["size"])
                    and (src is None or existing["initial_sha256"] == sha)
                )
                if not same:
                    raise RegistrationError(f"{what} is already registered with other settings")
                return self.job_state(job_id)
            rel = None
            if src is not None and sha is not None:
                final, _ = copy_atomic(
                    src,
                    sha,
                    self.checkpoint_dir / f"job-{job_id}",
                    lambda h: f"initial-{h}.pt",
                    "register",
                    what,
                )
                rel = f"job-{job_id}/{final.name}"
            with self._store.transaction():
                self._store.insert_job(job_id, target, model, size, sig_json, rel, sha)
                crash_point("register:in_tx")
            return self.job_state(job_id)

    def register_copies(self, job_id: int, n: int) -> list[int]:
        """Ensure the job has copies 1..n (creating the missing ones); return their ids."""
        with self._mutex:
            job = self._job_row(job_id)
            n = _int(n, f"job {job_id}: number of copies", RegistrationError)
            if not 1 <= n < self.max_job_count:
                raise RegistrationError(
                    f"job {job_id}: number of copies {n} is outside [1, {self.max_job_count})"
                )
            if job["completed"]:
                raise RegistrationError(f"job {job_id} is complete; it takes no more copies")
            existing = {int(r["idx"]) for r in self._store.copies(job_id)}
            wanted = [(ids.copy_id(job_id, i, self.max_job_count), i) for i in range(1, n + 1)]
            missing = [(cid, i) for cid, i in wanted if i not in existing]
            if missing:
                with self._store.transaction():
                    self._store.insert_copies(job_id, missing)
            return [cid for cid, _ in wanted]

    # -- rounds ----------------------------------------------------------------------------
    def open_round(self, round_: int) -> None:
        """Open round ``round_``; a no-op if it is already the open round.

        Raises RoundError if another round is open or ``round_`` is not after every earlier one.
        """
        with self._mutex:
            r = _int(round_, "round", RoundError)
            if r < 0:
                raise RoundError(f"round {r}: round numbers are non-negative")
            current = self._store.open_round()
            if current == r:
                return
            if current is not None:
                raise RoundError(
                    f"round {current} is still open; close it before opening round {r}"
                )
            last = self._store.last_round()
            if last is not None and r <= last:
                raise RoundError(f"round {r} is not after the last round {last}")
            with self._store.transaction():
                self._store.insert_round(r)

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

    def report(
        self,
        round_: int,
        copy_id: int,
        node: str,
        steps_done: int,
        seconds: float,
        checkpoint_path: str | os.PathLike[str],
        sha256: str,
    ) -> Report:
        """Record a copy's work in the open round. Rejections raise a ReportRejected subclass
        and change nothing (no row, no file)."""
        (out,) = self.report_many(
            round_, [(copy_id, node, steps_done, seconds, checkpoint_path, sha256)]
        )
        if isinstance(out, ReportRejected):
            raise out
        return out

    def report_many(
        self, round_: int, items: Sequence[ReportItem]
    ) -> list[Report | ReportRejected]:
        """Record the work of several copies in the open round, each ``(copy_id, node,
        steps_done, seconds, checkpoint_path, sha256)``, as :meth:`report` would one after the
        other, in one transaction and a few statements. Each item's outcome: its Report, or
        the ReportRejected that changed nothing for it."""
        with self._mutex:
            current = self._store.open_round()
            cids = [c for c in (_as_id(item[0]) for item in items) if c is not None]
            copies = self._store.copies_by_id(cids)
            jobs: dict[int, Any] = dict(
                self._store.jobs_by_id({int(c["job_id"]) for c in copies.values()})
            )
            reported = (
                {int(x["copy_id"]) for x in self._store.reports(current)}
                if current is not None
                else set()
            )
            out: list[Report | ReportRejected] = []
            rows: list[tuple[Any, ...]] = []
            signatures: dict[int, tuple[str, str | None, str | None]] = {}
            for item in items:
                try:
                    rep, new_sig = self._check_report(round_, item, current, copies, jobs, reported)
                except ReportRejected as exc:
                    out.append(exc)
                    continue
                out.append(rep)
                reported.add(rep.copy_id)
                rows.append(
                    (
                        rep.round,
                        rep.copy_id,
                        rep.node,
                        rep.steps,
                        rep.seconds,
                        str(rep.checkpoint),
                        rep.sha256,
                    )
                )
                if new_sig is not None:  # the job's first report fixes its model for the next
                    signatures[rep.job_id] = new_sig
                    jobs[rep.job_id] = {
                        **dict(jobs[rep.job_id]),
                        "signature": new_sig[0],
                        "model": new_sig[1],
                        "size": new_sig[2],
                    }
            if rows:
                with self._store.transaction():
                    self._store.insert_reports(rows)
                    for job_id, sig in signatures.items():
                        self._store.set_job_model(job_id, *sig)
                    for _ in rows:
                        crash_point("report:in_tx")
            return out

    def _check_report(
        self,
        round_: int,
        item: ReportItem,
        current: int | None,
        copies: Mapping[int, Any],
        jobs: Mapping[int, Any],
        reported: set[int],
    ) -> tuple[Report, tuple[str, str | None, str | None] | None]:
        """One report checked against the open round, its copy and its job (rows read
        beforehand); ReportRejected if it is refused."""
        copy_id, node, steps_done, seconds, checkpoint_path, sha256 = item
        what = f"round {round_} copy {copy_id}"
        steps = _int(steps_done, f"{what}: steps_done", InvalidReportError)
        if steps < 0:
            raise InvalidReportError(f"{what}: steps_done is negative ({steps})")
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise InvalidReportError(f"{what}: seconds must be a number, got {seconds!r}")
        if not math.isfinite(seconds) or seconds < 0:
            raise InvalidReportError(f"{what}: seconds must be finite and >= 0, got {seconds}")
        if not isinstance(node, str) or not node.strip():
            raise InvalidReportError(f"{what}: node must be a non-empty string")
        sha = str(sha256).lower()
        if not SHA256_RE.match(sha):
            raise InvalidReportError(f"{what}: {sha256!r} is not a sha256 hex digest")
        r = _int(round_, f"{what}: round", StaleRoundError)
        if r != current:
            state = self._store.round_state(r)
            now = "no round is open" if current is None else f"round {current} is open"
            raise StaleRoundError(f"{what}: round {r} is {state or 'not opened'}; {now}")
        cid = _int(copy_id, f"{what}: copy_id", UnknownCopyError)
        copy = copies.get(cid)
        if copy is None:
            raise UnknownCopyError(f"{what}: copy {cid} is not registered")
        job = jobs[int(copy["job_id"])]
        if job["completed"] or copy["discarded"]:
            reason = "is complete" if job["completed"] else "had this copy discarded"
            raise CopyDiscardedError(f"{what}: job {job['job_id']} {reason}")
        if cid in reported:
            raise DuplicateReportError(f"{what}: this copy already reported for round {r}")
        path = Path(checkpoint_path).resolve()
        payload = load_checkpoint(path, sha, what)
        new_sig = self._check_model(job, payload, what)
        del payload
        return Report(r, cid, int(job["job_id"]), node, steps, float(seconds), path, sha), new_sig

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Make the tracker's changes inside the block one transaction (e.g. every report of a
        round: one commit instead of one per report). A call that raises inside it changes
        nothing, as alone; a crash before the block ends loses all of them."""
        with self._mutex, self._store.transaction():
            yield

    def withdraw_report(self, round_: int, copy_id: int) -> None:
        """Remove a copy's accepted report from the open round (e.g. its checkpoint file was
        lost before the round closed); the copy's work in that round is then not counted."""
        with self._mutex:
            r = _int(round_, "round", RoundError)
            if self._store.open_round() != r:
                raise RoundError(f"round {r} is not the open round")
            cid = _int(copy_id, "copy_id", UnknownCopyError)
            if not self._store.has_report(r, cid):
                raise UnknownCopyError(f"round {r} copy {cid}: no report to withdraw")
            with self._store.transaction():
                self._store.delete_report(r, cid)

    @staticmethod
    def _check_model(
        job: Any, payload: Mapping[str, Any], what: str
    ) -> tuple[str, str | None, str | None] | None:
        """Raise ParameterMismatchError if the payload is not the job's model; return the
        (signature, model, size) to store when this report fixes the job's signature."""
        for name in ("model", "size"):
            if (
                job[name] is not None
                and payload.get(name) is not None
                and job[name] != payload[name]
            ):
                raise ParameterMismatchError(
                    f"{what}: checkpoint is {name} {payload[name]!r}, job {job['job_id']} is {job[name]!r}"
                )
        sig = signature(payload["state_dict"])
        if job["signature"] is None:
            return (
                json.dumps(sig),
                job["model"] or payload.get("model"),
                job["size"] or payload.get("size"),
            )
        diff = signature_difference(json.loads(job["signature"]), sig)
        if diff:
            raise ParameterMismatchError(f"{what}: {diff} in job {job['job_id']}'s model")
        return None

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

    def close_round(self, round_: int) -> RoundSummary:
        """Aggregate and consolidate the open round ``round_`` and close it (protocol in the
        module docstring). Closing an already-closed round returns its stored summary."""
        with self._mutex:
            r = _int(round_, "round", RoundError)
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

    def _prune(self, job_ids: list[int]) -> None:
        """Delete the jobs' owned checkpoints that fell out of the retention window."""
        keep = self._retained(set(job_ids))
        for job_id in job_ids:
            d = f"job-{job_id}"

            def doomed(name: str, d: str = d) -> bool:
                return OWNED_NAME_RE.match(name) is not None and f"{d}/{name}" not in keep

            # a planted link is never followed, at any component of the path: refused
            prune_files(self.checkpoint_dir / d, doomed)

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
    def _job_row(self, job_id: int) -> sqlite3.Row:
        row = self._store.job(_int(job_id, "job_id", UnknownJobError))
        if row is None:
            raise UnknownJobError(f"job {job_id} is not registered")
        return row

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

    def _quarantine(self, job_id: int, rel: str, reason: str) -> Quarantine:
        """Move an owned checkpoint aside to ``quarantine/`` (if it still exists)."""
        src = self._abs(rel)
        moved: Path | None = None
        if src.exists():
            qdir = self.checkpoint_dir / QUARANTINE_DIR / f"job-{job_id}"
            moved = qdir / src.name
            n = 1
            while moved.exists():
                moved = qdir / f"{src.name}.{n}"
                n += 1
            rename_in(src, moved, create=True)  # never through a link planted on the way
            fsync_dir(src.parent)
        return Quarantine(job_id, src, moved, reason)

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
