"""SQLite persistence of the Job Tracker (stdlib sqlite3, WAL journal, synchronous=FULL).

The store only runs SQL; the rules live in :mod:`tracker.tracker`. Every state change the tracker
makes happens inside one :meth:`Store.transaction` (``BEGIN IMMEDIATE`` ... ``COMMIT``), so a
process killed at any instant leaves either the old or the new state, never a mix.
Paths of tracker-owned checkpoints are stored relative to the checkpoint directory.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Collection, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from hadar.core.state_db import StateDb

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE jobs (
    job_id         INTEGER PRIMARY KEY CHECK (job_id >= 0),
    target_steps   INTEGER NOT NULL CHECK (target_steps > 0),
    model          TEXT,
    size           TEXT,
    signature      TEXT,             -- JSON {key: [shape, dtype]}, NULL until fixed
    steps_done     INTEGER NOT NULL DEFAULT 0 CHECK (steps_done BETWEEN 0 AND target_steps),
    completed      INTEGER NOT NULL DEFAULT 0 CHECK (completed IN (0, 1)),
    ckpt_path      TEXT,             -- latest consolidated checkpoint (relative), NULL if none
    ckpt_sha256    TEXT,
    ckpt_round     INTEGER,          -- round that produced it; NULL for the initial checkpoint
    initial_path   TEXT,
    initial_sha256 TEXT
);
CREATE TABLE copies (
    copy_id   INTEGER PRIMARY KEY,
    job_id    INTEGER NOT NULL REFERENCES jobs (job_id),
    idx       INTEGER NOT NULL CHECK (idx >= 1),
    discarded INTEGER NOT NULL DEFAULT 0 CHECK (discarded IN (0, 1)),
    UNIQUE (job_id, idx)
);
CREATE TABLE rounds (
    round INTEGER PRIMARY KEY CHECK (round >= 0),
    state TEXT NOT NULL CHECK (state IN ('open', 'closed'))
);
CREATE TABLE reports (
    round       INTEGER NOT NULL REFERENCES rounds (round),
    copy_id     INTEGER NOT NULL REFERENCES copies (copy_id),
    node        TEXT NOT NULL,
    steps       INTEGER NOT NULL CHECK (steps >= 0),
    seconds     REAL NOT NULL CHECK (seconds >= 0),
    ckpt_path   TEXT NOT NULL,       -- absolute path of the copy's checkpoint (not owned)
    ckpt_sha256 TEXT NOT NULL,
    UNIQUE (round, copy_id)
);
CREATE TABLE consolidations (
    round          INTEGER NOT NULL REFERENCES rounds (round),
    job_id         INTEGER NOT NULL REFERENCES jobs (job_id),
    copies         INTEGER NOT NULL,  -- reports consolidated
    steps_reported INTEGER NOT NULL,  -- sum of the reports' steps
    steps_added    INTEGER NOT NULL,  -- counted: min(steps_reported, remaining)
    steps_total    INTEGER NOT NULL,  -- job's steps_done after this round
    completed      INTEGER NOT NULL CHECK (completed IN (0, 1)),
    ckpt_path      TEXT,              -- relative; NULL when the job has no checkpoint yet
    ckpt_sha256    TEXT,
    ckpt_round     INTEGER,           -- round that produced ckpt_path (earlier if 0 steps)
    UNIQUE (round, job_id)
);
CREATE TABLE IF NOT EXISTS rollbacks (
    job_id         INTEGER NOT NULL REFERENCES jobs (job_id),
    after_round    INTEGER,           -- the last closed round when it happened (NULL: none)
    steps_before   INTEGER NOT NULL,
    steps_after    INTEGER NOT NULL,  -- steps_removed = steps_before - steps_after
    reason         TEXT NOT NULL
);
"""
ROLLBACKS_DDL = SCHEMA[SCHEMA.index("CREATE TABLE IF NOT EXISTS rollbacks") :]
"""Added without a schema version change: a database from before gets the table when opened."""

INDEXES_DDL = (
    "CREATE INDEX IF NOT EXISTS consolidations_by_job ON consolidations (job_id, round)",
    "CREATE INDEX IF NOT EXISTS rounds_by_state ON rounds (state, round)",
)
"""A job's checkpoint history and the open round without scanning every round (added when a
database is opened, without a schema version change: an index holds no data of its own)."""

TABLES = ("meta", "jobs", "copies", "rounds", "reports", "consolidations", "rollbacks")


class Store:
    """A connection to the tracker database with the queries the tracker needs."""

    def __init__(self, db: Path | StateDb, *, read_only: bool = False) -> None:
        """Over its own file (``db`` a path: opened, and closed by :meth:`close`) or over a
        state file shared with other tables (``db`` a :class:`StateDb`: a run's
        ``state.sqlite``, whose owner closes it)."""
        self.shared = isinstance(db, StateDb)
        # refuses a damaged file (integrity check)
        self.db = db if isinstance(db, StateDb) else StateDb(db, read_only=read_only)
        self.db_path = self.db.path
        self.conn = self.db.conn
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA foreign_keys=ON")
        if not self.db.read_only and self.is_initialized():
            with self.transaction() as c:
                c.execute(ROLLBACKS_DDL)
                for ddl in INDEXES_DDL:
                    c.execute(ddl)

    def close(self) -> None:
        if not self.shared:
            self.db.close()

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """One atomic write transaction; rolled back if the block raises. Inside another one
        (also one the owner of a shared state file began) it is a savepoint: its changes are
        undone if the block raises and committed with the outer transaction."""
        return self.db.transaction()

    # -- schema and meta -------------------------------------------------------------------
    def is_initialized(self) -> bool:
        row = self.conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
        ).fetchone()
        return row is not None

    def initialize(self, meta: dict[str, str]) -> None:
        """Create the schema and write ``meta`` (plus the schema version) in one transaction."""
        with self.transaction() as c:
            for statement in re.split(r";\s*$", SCHEMA, flags=re.MULTILINE):
                if statement.strip():
                    c.execute(statement)
            for ddl in INDEXES_DDL:
                c.execute(ddl)
            rows = {"schema_version": str(SCHEMA_VERSION), **meta}
            c.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", sorted(rows.items()))

    def meta(self) -> dict[str, str]:
        return {r["key"]: r["value"] for r in self.conn.execute("SELECT key, value FROM meta")}

    # -- reads -----------------------------------------------------------------------------
    def job(self, job_id: int) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self.conn.execute(
            "SELECT * FROM jobs WHERE job_id = ?", (job_id,)
        ).fetchone()
        return row

    def completed_jobs(self) -> set[int]:
        return {int(r[0]) for r in self.conn.execute("SELECT job_id FROM jobs WHERE completed = 1")}

    def jobs(self) -> list[sqlite3.Row]:
        return self.conn.execute("SELECT * FROM jobs ORDER BY job_id").fetchall()

    def copies_by_id(self, copy_ids: Collection[int]) -> dict[int, sqlite3.Row]:
        """The rows of these copies (the unregistered ones left out), in one query."""
        ids = sorted(set(copy_ids))
        rows = self.conn.execute(
            f"SELECT * FROM copies WHERE copy_id IN ({', '.join('?' * len(ids))})", ids
        ).fetchall()
        return {int(r["copy_id"]): r for r in rows}

    def jobs_by_id(self, job_ids: Collection[int] | None = None) -> dict[int, sqlite3.Row]:
        """The rows of these jobs (every job's with None), in one query."""
        if job_ids is None:
            return {int(r["job_id"]): r for r in self.jobs()}
        ids = sorted(set(job_ids))
        rows = self.conn.execute(
            f"SELECT * FROM jobs WHERE job_id IN ({', '.join('?' * len(ids))})", ids
        ).fetchall()
        return {int(r["job_id"]): r for r in rows}

    def active_copies_of(self, job_ids: Collection[int]) -> dict[int, list[int]]:
        """Per job, its copies that are not discarded, by index (one query)."""
        ids = sorted(set(job_ids))
        out: dict[int, list[int]] = {j: [] for j in ids}
        for r in self.conn.execute(
            f"SELECT job_id, copy_id FROM copies WHERE discarded = 0 AND job_id IN"
            f" ({', '.join('?' * len(ids))}) ORDER BY job_id, idx",
            ids,
        ):
            out[int(r[0])].append(int(r[1]))
        return out

    def copies(self, job_id: int) -> list[sqlite3.Row]:
        return self.conn.execute(
            "SELECT * FROM copies WHERE job_id = ? ORDER BY idx", (job_id,)
        ).fetchall()

    def round_state(self, round_: int) -> str | None:
        row = self.conn.execute("SELECT state FROM rounds WHERE round = ?", (round_,)).fetchone()
        return None if row is None else str(row["state"])

    def open_round(self) -> int | None:
        row = self.conn.execute("SELECT round FROM rounds WHERE state = 'open'").fetchone()
        return None if row is None else int(row["round"])

    def last_round(self) -> int | None:
        row = self.conn.execute("SELECT MAX(round) AS r FROM rounds").fetchone()
        return None if row["r"] is None else int(row["r"])

    def reports(self, round_: int) -> list[sqlite3.Row]:
        return self.conn.execute(
            "SELECT r.*, c.job_id FROM reports r JOIN copies c USING (copy_id)"
            " WHERE r.round = ? ORDER BY r.copy_id",
            (round_,),
        ).fetchall()

    def has_report(self, round_: int, copy_id: int) -> bool:
        row = self.conn.execute(
            "SELECT 1 FROM reports WHERE round = ? AND copy_id = ?", (round_, copy_id)
        ).fetchone()
        return row is not None

    def consolidations(self, round_: int) -> list[sqlite3.Row]:
        return self.conn.execute(
            "SELECT * FROM consolidations WHERE round = ? ORDER BY job_id", (round_,)
        ).fetchall()

    def referenced_paths(
        self, keep_history: bool, job_ids: Collection[int] | None = None
    ) -> set[str]:
        """Relative paths of tracker-owned checkpoints that must be kept: every job's latest
        (of ``job_ids`` when given; and every one ever written with ``keep_history``)."""
        if job_ids is None or keep_history:
            paths = {r[0] for r in self.conn.execute("SELECT ckpt_path FROM jobs") if r[0]}
        else:
            paths = {r["ckpt_path"] for r in self.jobs_by_id(job_ids).values() if r["ckpt_path"]}
        if keep_history:
            paths |= {r[0] for r in self.conn.execute("SELECT initial_path FROM jobs") if r[0]}
            paths |= {
                r[0] for r in self.conn.execute("SELECT ckpt_path FROM consolidations") if r[0]
            }
        return paths

    def recorded_paths(self) -> set[str]:
        """Every checkpoint path the tables record (jobs' latest and initial, consolidations')."""
        paths = {r[0] for r in self.conn.execute("SELECT ckpt_path FROM jobs") if r[0] is not None}
        paths |= {
            r[0] for r in self.conn.execute("SELECT initial_path FROM jobs") if r[0] is not None
        }
        paths |= {
            r[0]
            for r in self.conn.execute("SELECT ckpt_path FROM consolidations")
            if r[0] is not None
        }
        return paths

    def checkpoint_history(self, job_id: int) -> Iterator[dict[str, Any]]:
        """The job's checkpoints, newest first: ``{path, sha256, round, steps}`` of every round
        that wrote one, then the initial checkpoint (round None, 0 steps) if it has one. Rows
        are read as they are consumed: a caller that stops early reads only the newest."""
        rows = self.conn.execute(
            "SELECT ckpt_path, ckpt_sha256, round, steps_total FROM consolidations"
            " WHERE job_id = ? AND ckpt_round = round AND ckpt_path IS NOT NULL ORDER BY round DESC",
            (job_id,),
        )
        for r in rows:
            yield {"path": r[0], "sha256": r[1], "round": int(r[2]), "steps": int(r[3])}
        job = self.job(job_id)
        if job is not None and job["initial_path"]:
            yield {
                "path": job["initial_path"],
                "sha256": job["initial_sha256"],
                "round": None,
                "steps": 0,
            }

    # -- writes (call inside transaction()) ------------------------------------------------
    def insert_job(
        self,
        job_id: int,
        target_steps: int,
        model: str | None,
        size: str | None,
        signature: str | None,
        initial_path: str | None,
        initial_sha256: str | None,
    ) -> None:
        self.conn.execute(
            "INSERT INTO jobs (job_id, target_steps, model, size, signature, ckpt_path,"
            " ckpt_sha256, initial_path, initial_sha256) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                job_id,
                target_steps,
                model,
                size,
                signature,
                initial_path,
                initial_sha256,
                initial_path,
                initial_sha256,
            ),
        )

    def set_job_model(
        self, job_id: int, signature: str, model: str | None, size: str | None
    ) -> None:
        self.conn.execute(
            "UPDATE jobs SET signature = ?, model = ?, size = ? WHERE job_id = ?",
            (signature, model, size, job_id),
        )

    def insert_copies(self, job_id: int, copies: list[tuple[int, int]]) -> None:
        self.conn.executemany(
            "INSERT INTO copies (copy_id, job_id, idx) VALUES (?, ?, ?)",
            [(cid, job_id, idx) for cid, idx in copies],
        )

    def insert_round(self, round_: int) -> None:
        self.conn.execute("INSERT INTO rounds (round, state) VALUES (?, 'open')", (round_,))

    def insert_reports(self, rows: list[tuple[Any, ...]]) -> None:
        """``(round, copy_id, node, steps, seconds, path, sha256)`` rows, in one statement."""
        self.conn.executemany(
            "INSERT INTO reports (round, copy_id, node, steps, seconds, ckpt_path, ckpt_sha256)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows,
        )

    def delete_report(self, round_: int, copy_id: int) -> None:
        self.conn.execute("DELETE FROM reports WHERE round = ? AND copy_id = ?", (round_, copy_id))

    def insert_rollback(
        self, job_id: int, after_round: int | None, before: int, after: int, reason: str
    ) -> None:
        self.conn.execute(
            "INSERT INTO rollbacks (job_id, after_round, steps_before, steps_after, reason)"
            " VALUES (?, ?, ?, ?, ?)",
            (job_id, after_round, before, after, reason),
        )

    def steps_audit(self) -> dict[int, tuple[int, int]]:
        """Per job: (steps the consolidations added, steps the rollbacks removed)."""
        added = dict(
            self.conn.execute(
                "SELECT job_id, SUM(steps_added) FROM consolidations GROUP BY job_id"
            ).fetchall()
        )
        removed = dict(
            self.conn.execute(
                "SELECT job_id, SUM(steps_before - steps_after) FROM rollbacks GROUP BY job_id"
            ).fetchall()
        )
        return {
            int(j): (int(added.get(j) or 0), int(removed.get(j) or 0))
            for j in sorted(set(added) | set(removed))
        }

    def close_jobs(self, round_: int, plans: list[dict[str, Any]]) -> None:
        """A round's consolidation rows and its jobs' progress, a few statements for all of
        them. ``plans``: per job ``{"row": {job_id, copies, steps_reported, steps_added,
        steps_total, completed, path, sha256, ckpt_round}, "job": the keyword arguments of
        :meth:`set_job_progress`}``."""
        self.conn.executemany(
            "INSERT INTO consolidations (round, job_id, copies, steps_reported, steps_added,"
            " steps_total, completed, ckpt_path, ckpt_sha256, ckpt_round)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    round_,
                    c["job_id"],
                    c["copies"],
                    c["steps_reported"],
                    c["steps_added"],
                    c["steps_total"],
                    int(c["completed"]),
                    c["path"],
                    c["sha256"],
                    c["ckpt_round"],
                )
                for c in (p["row"] for p in plans)
            ],
        )
        self.conn.executemany(
            "UPDATE jobs SET steps_done = ?, completed = ?, ckpt_path = ?, ckpt_sha256 = ?,"
            " ckpt_round = ? WHERE job_id = ?",
            [
                (
                    j["steps_done"],
                    int(j["completed"]),
                    j["path"],
                    j["sha256"],
                    j["ckpt_round"],
                    j["job_id"],
                )
                for j in (p["job"] for p in plans)
            ],
        )
        self.conn.executemany(
            "UPDATE copies SET discarded = 1 WHERE job_id = ?",
            [(p["job"]["job_id"],) for p in plans if p["job"]["completed"]],
        )

    def set_job_progress(
        self,
        job_id: int,
        steps_done: int,
        completed: bool,
        path: str | None,
        sha256: str | None,
        ckpt_round: int | None,
    ) -> None:
        self.conn.execute(
            "UPDATE jobs SET steps_done = ?, completed = ?, ckpt_path = ?, ckpt_sha256 = ?,"
            " ckpt_round = ? WHERE job_id = ?",
            (steps_done, int(completed), path, sha256, ckpt_round, job_id),
        )
        if completed:
            self.conn.execute("UPDATE copies SET discarded = 1 WHERE job_id = ?", (job_id,))

    def reopen_job(self, job_id: int) -> None:
        """Mark a job incomplete again and its copies active (after a rollback)."""
        self.conn.execute("UPDATE jobs SET completed = 0 WHERE job_id = ?", (job_id,))
        self.conn.execute("UPDATE copies SET discarded = 0 WHERE job_id = ?", (job_id,))

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def set_round_closed(self, round_: int) -> None:
        self.conn.execute("UPDATE rounds SET state = 'closed' WHERE round = ?", (round_,))
