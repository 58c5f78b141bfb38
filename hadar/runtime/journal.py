"""The coordinator's own durable state: rounds (plan, timings, status) and node health, in
SQLite; events in an append-only JSONL file.

Progress (steps, checkpoints) lives in the Job Tracker's database, which is the authority:
a round counts once the tracker has closed it. The journal records the plan before dispatch
and the timings after the tracker's close; everything per job (service time, time per GPU
type, start and finish) is recomputed from both on start-up, so the two never need a joint
transaction.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hadar.core.io import open_append
from hadar.core.state_db import StateFileError, open_state_db

SCHEMA = """
CREATE TABLE IF NOT EXISTS rounds (
    round INTEGER PRIMARY KEY,
    attempt INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('planned', 'closed', 'aborted')),
    plan TEXT NOT NULL,
    started REAL NOT NULL,
    ended REAL,
    decision_s REAL NOT NULL,
    timings TEXT,
    policy_state TEXT
);
CREATE TABLE IF NOT EXISTS nodes (
    name TEXT PRIMARY KEY,
    up INTEGER NOT NULL,
    since_round INTEGER NOT NULL,
    error TEXT
);
"""


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


class Journal:
    """SQLite journal of rounds and node states (WAL, synchronous=FULL, one transaction a change)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = open_state_db(path)
        self.conn.executescript(SCHEMA)
        columns = {row[1] for row in self.conn.execute("PRAGMA table_info(rounds)")}
        if "policy_state" not in columns:  # a journal written before policies had a state
            self.conn.execute("ALTER TABLE rounds ADD COLUMN policy_state TEXT")
        self._lock = threading.Lock()

    def close(self) -> None:
        self.conn.close()

    def _tx(self, sql: str, args: tuple[Any, ...]) -> None:
        with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                self.conn.execute(sql, args)
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:  # SQLite may have rolled back already (disk full)
                    self.conn.execute("ROLLBACK")
                raise

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
            "INSERT OR REPLACE INTO rounds (round, attempt, status, plan, started, ended, decision_s, timings,"
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
            "UPDATE rounds SET status = 'closed', ended = ?, timings = ? WHERE round = ?",
            (ended, json.dumps(timings), round_),
        )

    def abort_round(self, round_: int, ended: float) -> None:
        self._tx("UPDATE rounds SET status = 'aborted', ended = ? WHERE round = ?", (ended, round_))

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
        with self._lock:
            return dict(self.conn.execute("SELECT round, status FROM rounds").fetchall())

    def _select(self, where: str, args: tuple[Any, ...] = ()) -> list[RoundRow]:
        with self._lock:
            rows = self.conn.execute(
                "SELECT round, attempt, status, plan, started, ended, decision_s, timings,"
                f" policy_state FROM rounds {where}",
                args,
            ).fetchall()
        return [
            RoundRow(
                r[0],
                r[1],
                r[2],
                json.loads(r[3]),
                r[4],
                r[5],
                r[6],
                json.loads(r[7]) if r[7] else {},
                json.loads(r[8]) if r[8] else {},
            )
            for r in rows
        ]

    def set_node(self, name: str, up: bool, round_: int, error: str | None = None) -> None:
        self._tx(
            "INSERT OR REPLACE INTO nodes (name, up, since_round, error) VALUES (?, ?, ?, ?)",
            (name, int(up), round_, error),
        )

    def node_states(self) -> dict[str, tuple[bool, int, str | None]]:
        with self._lock:
            rows = self.conn.execute("SELECT name, up, since_round, error FROM nodes").fetchall()
        return {r[0]: (bool(r[1]), r[2], r[3]) for r in rows}


def check_state_files(
    journal: Journal, tracker_last_closed: int | None, tracker_path: Path
) -> None:
    """The journal plans every round before the tracker opens it and closes it only after the
    tracker did; either file lacking a round the other has means it lost history (truncated,
    replaced or recreated empty). One line naming the file that lost it."""
    rows = journal.statuses()
    if tracker_last_closed is not None and tracker_last_closed not in rows:
        raise StateFileError(
            f"{journal.path}: has no record of round {tracker_last_closed}, which "
            f"{tracker_path.name} closed (the file was truncated or replaced)"
        )
    closed = [r for r, status in rows.items() if status == "closed"]
    if closed and (tracker_last_closed is None or max(closed) > tracker_last_closed):
        raise StateFileError(
            f"{tracker_path}: has no record of round {max(closed)}, which {journal.path.name} "
            f"closed (the file was truncated or replaced)"
        )


class EventLog:
    """Append-only JSONL: one line per dispatch, result, failure, aggregation, ... Each line is
    written (readers see it, a killed process keeps it) as it is emitted and made durable by
    :meth:`sync` at the run's commit points (or by ``emit(..., sync=True)``), not one fsync per
    line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._unsynced = False

    def emit(self, name: str, /, *, sync: bool = False, **fields: Any) -> dict[str, Any]:
        event = {"t": round(time.time(), 3), "event": name, **fields}
        line = json.dumps(event, default=str) + "\n"
        with self._lock, open_append(self.path) as fh:
            fh.write(line)
            fh.flush()
            if sync:
                os.fsync(fh.fileno())
            self._unsynced = not sync
        return event

    def sync(self) -> None:
        """Make every line emitted so far durable (one fsync; none when nothing is new)."""
        with self._lock:
            if self._unsynced and self.path.exists():
                with open_append(self.path) as fh:
                    os.fsync(fh.fileno())
            self._unsynced = False

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line torn by a crash mid-write
        return out
