"""The coordinator's own durable state, in the run's ``state.sqlite`` beside the Job Tracker's
tables: rounds (plan, timings, status), node health and the event log.

Progress (steps, checkpoints) lives in the Job Tracker's tables, which are the authority: a round
counts once the tracker has closed it. The journal records the plan before dispatch, and the
timings in the same transaction as the tracker's close (the round's commit point). Events are
written to the ``events`` table with the next commit (a round's with that round) and appended to
``events.jsonl``, an output for people and tools that is never read back.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from hadar.core.io import open_append
from hadar.core.state_db import StateDb, StateFileError

JOURNAL_DDL = (
    """CREATE TABLE IF NOT EXISTS run_rounds (
    round INTEGER PRIMARY KEY,
    attempt INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('planned', 'closed', 'aborted')),
    plan TEXT NOT NULL,
    started REAL NOT NULL,
    ended REAL,
    decision_s REAL NOT NULL,
    timings TEXT,
    policy_state TEXT
)""",
    """CREATE TABLE IF NOT EXISTS nodes (
    name TEXT PRIMARY KEY,
    up INTEGER NOT NULL,
    since_round INTEGER NOT NULL,
    error TEXT
)""",
)
"""The journal's tables (the tracker's ``rounds`` table is another one: what it counted)."""

EVENTS_DDL = (
    """CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY,
    t REAL NOT NULL,
    event TEXT NOT NULL,
    round INTEGER,
    body TEXT NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS events_by_name ON events (event)",
)


def _create(db: StateDb, ddl: tuple[str, ...]) -> None:
    if not db.read_only:
        with db.transaction() as c:
            for statement in ddl:
                c.execute(statement)


@dataclass(frozen=True)
class RoundRow:
    round: int
    attempt: int
    status: str
    plan: list[dict[str, Any]]
    started: float
    ended: float | None
    decision_s: float
    timings: dict[str, Any]
    policy_state: dict[str, Any] = field(default_factory=dict)
    """The policy's state after deciding this round (``Policy.state``), restored on resume."""


def _round_row(r: Any) -> RoundRow:
    """A ``run_rounds`` row, its values of the types hadar writes (TypeError or ValueError
    otherwise: an edited state file, which :func:`~hadar.core.state_db.reading_state` names)."""
    plan = json.loads(r[3])
    timings = json.loads(r[7]) if r[7] else {}
    state = json.loads(r[8]) if r[8] else {}
    numbers = (r[4], r[6]) if r[5] is None else (r[4], r[5], r[6])
    if not (
        all(type(x) is int for x in (r[0], r[1]))
        and all(type(x) in (int, float) and math.isfinite(x) for x in numbers)
        and isinstance(plan, list)
        and isinstance(timings, dict)
        and isinstance(state, dict)
    ):
        raise TypeError(f"run_rounds: round {r[0]!r}: a value of a type hadar never writes")
    ended = None if r[5] is None else float(r[5])
    return RoundRow(r[0], r[1], r[2], plan, float(r[4]), ended, float(r[6]), timings, state)


class Journal:
    """The rounds and node states of a run (one transaction a change, or part of the caller's)."""

    def __init__(self, db: StateDb | Path) -> None:
        """Over the run's shared state file, or a file of its own (``db`` a path)."""
        self.shared = isinstance(db, StateDb)
        self.db = db if isinstance(db, StateDb) else StateDb(db)
        self.path = self.db.path
        _create(self.db, JOURNAL_DDL)

    def close(self) -> None:
        if not self.shared:
            self.db.close()

    def _tx(self, sql: str, args: tuple[Any, ...]) -> None:
        with self.db.transaction() as c:
            c.execute(sql, args)

    def plan_round(
        self,
        round_: int,
        attempt: int,
        plan: list[dict[str, Any]],
        started: float,
        decision_s: float,
        policy_state: dict[str, Any] | None = None,
    ) -> None:
        """Record a round's plan (and the policy's state after deciding it) before dispatch."""
        self._tx(
            "INSERT OR REPLACE INTO run_rounds (round, attempt, status, plan, started, ended, decision_s, timings,"
            " policy_state) VALUES (?, ?, 'planned', ?, ?, NULL, ?, NULL, ?)",
            (
                round_,
                attempt,
                json.dumps(plan),
                started,
                decision_s,
                json.dumps(policy_state or {}),
            ),
        )

    def close_round(self, round_: int, ended: float, timings: dict[str, Any]) -> None:
        self._tx(
            "UPDATE run_rounds SET status = 'closed', ended = ?, timings = ? WHERE round = ?",
            (ended, json.dumps(timings), round_),
        )

    def abort_round(self, round_: int, ended: float) -> None:
        self._tx(
            "UPDATE run_rounds SET status = 'aborted', ended = ? WHERE round = ?", (ended, round_)
        )

    def rounds(self) -> list[RoundRow]:
        """Every round, in order (start-up and reports: never once per round)."""
        return self._select("ORDER BY round")

    def iter_rounds(self, status: str | None = None, batch: int = 256) -> Iterator[RoundRow]:
        """Every round (of ``status``), in order, read ``batch`` rows at a time: start-up reads
        a long run's history without holding all of it in memory."""
        after = -1
        while True:
            where = "WHERE round > ?" + (" AND status = ?" if status else "")
            args = (after, status) if status else (after,)
            rows = self._select(f"{where} ORDER BY round LIMIT {int(batch)}", args)
            yield from rows
            if len(rows) < batch:
                return
            after = rows[-1].round

    def round(self, round_: int) -> RoundRow | None:
        """One round's row (None if it was never planned)."""
        rows = self._select("WHERE round = ?", (round_,))
        return rows[0] if rows else None

    def last_closed(self) -> RoundRow | None:
        """The last closed round's row (None before the first)."""
        rows = self._select("WHERE status = 'closed' ORDER BY round DESC LIMIT 1")
        return rows[0] if rows else None

    def statuses(self) -> dict[int, str]:
        """Each round's status (without its plan and timings)."""
        with self.db.lock:
            rows = self.db.conn.execute("SELECT round, status FROM run_rounds").fetchall()
        return {int(r[0]): str(r[1]) for r in rows}

    def _select(self, where: str, args: tuple[Any, ...] = ()) -> list[RoundRow]:
        with self.db.lock:
            rows = self.db.conn.execute(
                "SELECT round, attempt, status, plan, started, ended, decision_s, timings,"
                f" policy_state FROM run_rounds {where}",
                args,
            ).fetchall()
        return [_round_row(r) for r in rows]

    def set_node(self, name: str, up: bool, round_: int, error: str | None = None) -> None:
        self._tx(
            "INSERT OR REPLACE INTO nodes (name, up, since_round, error) VALUES (?, ?, ?, ?)",
            (name, int(up), round_, error),
        )

    def node_states(self) -> dict[str, tuple[bool, int, str | None]]:
        with self.db.lock:
            rows = self.db.conn.execute("SELECT name, up, since_round, error FROM nodes").fetchall()
        return {r[0]: (bool(r[1]), r[2], r[3]) for r in rows}


def check_state_files(
    journal: Journal, tracker_last_closed: int | None, tracker_path: Path
) -> None:
    """The journal plans every round before the tracker opens it and closes it with the
    tracker's close; either lacking a round the other has means history was lost (a file
    truncated, replaced or recreated empty). One line naming the file that lost it (in a run's
    one state file, the tables that did)."""
    same = tracker_path.resolve() == journal.path.resolve()
    journal_name = "its tracker tables" if same else tracker_path.name
    tracker_name = "its journal" if same else journal.path.name
    rows = journal.statuses()
    if tracker_last_closed is not None and tracker_last_closed not in rows:
        raise StateFileError(
            f"{journal.path}: has no record of round {tracker_last_closed}, which "
            f"{journal_name} closed (the file was truncated or replaced)"
        )
    closed = [r for r, status in rows.items() if status == "closed"]
    if closed and (tracker_last_closed is None or max(closed) > tracker_last_closed):
        raise StateFileError(
            f"{tracker_path}: has no record of round {max(closed)}, which {tracker_name} "
            f"closed (the file was truncated or replaced)"
        )


def _finite(value: Any) -> Any:
    """``value`` with every float that is not finite (a diverged loss) as None, so that each
    line of ``events.jsonl`` is strict JSON (``NaN`` is not) for any tool that reads it."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


class EventLog:
    """The run's events (dispatch, result, failure, aggregation, ...): rows of the state file's
    ``events`` table, written with the next transaction that commits (a round's events with its
    close), and lines of ``events.jsonl`` (an output, never read back), each written as it is
    emitted (readers see it, a killed process keeps it; the file is opened once, so a file
    moved away during the run goes on getting the lines) and fsynced by :meth:`sync`.
    ``emit(..., after_commit=True)``: the line is written once the transaction in progress
    commits (events that say a round was committed)."""

    def __init__(self, path: Path, db: StateDb | None = None) -> None:
        self.path = path
        self.db = db
        self._lock = threading.Lock()
        self._unsynced = False
        self._fh: IO[str] | None = None
        self._pending: list[tuple[float, str, Any, str]] = []
        """Rows not yet in the table: (t, event, round, JSON)."""
        if db is not None and not db.read_only:
            _create(db, EVENTS_DDL)
            db.before_commit(self._flush)

    def emit(
        self, name: str, /, *, sync: bool = False, after_commit: bool = False, **fields: Any
    ) -> dict[str, Any]:
        event = {"t": round(time.time(), 3), "event": name, **fields}
        body = json.dumps(_finite(event), default=str, allow_nan=False)
        rnd = fields.get("round")
        with self._lock:
            self._pending.append((event["t"], name, rnd if isinstance(rnd, int) else None, body))
        if after_commit and self.db is not None:
            self.db.after_commit(lambda: self._write(body + "\n", False))
        else:
            self._write(body + "\n", sync)
        if sync:
            self.sync()
        return event

    def _write(self, line: str, sync: bool) -> None:
        with self._lock:
            if self._fh is None:  # opened once (not through a link), kept until close()
                self._fh = open_append(Path(os.path.abspath(self.path)), nofollow=True)
            self._fh.write(line)
            self._fh.flush()
            if sync:
                os.fsync(self._fh.fileno())
            self._unsynced = not sync

    def close(self) -> None:
        """Close ``events.jsonl`` (a later line opens it again)."""
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None

    def _flush(self) -> None:
        """Insert the pending rows (inside the state file's transaction, before it commits)."""
        assert self.db is not None
        with self._lock:
            rows = list(self._pending)
        if not rows:
            return
        self.db.conn.executemany(
            "INSERT INTO events (t, event, round, body) VALUES (?, ?, ?, ?)", rows
        )
        self.db.after_commit(lambda: self._drop(len(rows)))

    def _drop(self, n: int) -> None:
        with self._lock:
            del self._pending[:n]

    def sync(self) -> None:
        """Commit the pending rows and make every line written so far durable (one fsync;
        none when nothing is new)."""
        if self.db is not None and not self.db.read_only and self._pending:
            with self.db.transaction():
                pass  # the commit writes the pending rows
        with self._lock:
            if self._unsynced and self._fh is not None:
                os.fsync(self._fh.fileno())
            self._unsynced = False

    def read(self, names: Collection[str] | None = None) -> list[dict[str, Any]]:
        """The events (of ``names``), in order: those in the state file, then those this log
        emitted that the next commit writes."""
        with self._lock:
            pending = [
                json.loads(row[3]) for row in self._pending if names is None or row[1] in names
            ]
        if self.db is None or not self.db.has_table("events"):
            return pending
        where, args = "", tuple(names or ())
        if names is not None:
            where = f" WHERE event IN ({', '.join('?' * len(names))})"
        with self.db.lock:
            rows = self.db.conn.execute(
                f"SELECT body FROM events{where} ORDER BY seq", args
            ).fetchall()
        return [json.loads(r[0]) for r in rows] + pending
