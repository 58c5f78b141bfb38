"""Opening the SQLite file that holds a run's state, refusing a damaged one, and its
transactions.

A run's ``state.sqlite`` (the Job Tracker's tables, the coordinator's journal and its events) is
the authority on what the run has done; a file that was truncated, overwritten or bit-flipped
must stop the run with one line naming it, never be read as "less history" or silently
recreated. :class:`StateDb` is one connection to such a file shared by every part that writes it,
so that a commit point (a round's close: the tracker's rows, the journal's timings and the
round's events) is ONE transaction.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from hadar.core.errors import InputError
from hadar.core.io import non_regular_kind

SIDE_FILES = ("-journal", "-wal", "-shm")
"""The files SQLite keeps beside a database (its rollback journal, write-ahead log and shared
memory index)."""


class StateFileError(InputError):
    """A state database is damaged (fails SQLite's integrity check or is not a database)."""


def check_side_files(path: Path) -> None:
    """:class:`StateFileError` naming the first of SQLite's files beside ``path``
    (:data:`SIDE_FILES`) that is there but not a regular file: SQLite opens them with a plain
    ``open()``, which on a FIFO waits for a writer forever, deaf to signals."""
    for suffix in SIDE_FILES:
        side = path.with_name(path.name + suffix)
        try:
            kind = non_regular_kind(os.stat(side).st_mode)
        except OSError:
            continue  # missing (the usual case), or a dangling link: SQLite fails on its own
        if kind is not None:
            raise StateFileError(
                f"{side}: is {kind}, not a regular file; SQLite keeps its journal of "
                f"{path.name} there (remove it)"
            )


def open_state_db(path: Path, *, read_only: bool = False) -> sqlite3.Connection:
    """Connect to ``path`` (WAL, synchronous=FULL, autocommit) after ``PRAGMA quick_check``;
    :class:`StateFileError` naming the file if it is damaged. ``read_only``: an existing file,
    opened so that nothing can write it (a reader beside the process that writes it). A path
    that is not a regular file (a FIFO, where SQLite's open would wait forever; a folder) is a
    :class:`StateFileError` before SQLite opens it."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None  # a new run's file, created by the connection (a reader: refused below)
    kind = None if mode is None else non_regular_kind(mode)
    if kind is not None:
        raise StateFileError(
            f"{path}: is {kind}, not a regular file; a run's state is a SQLite file hadar wrote"
        )
    check_side_files(path)
    conn = (
        sqlite3.connect(
            f"{path.resolve().as_uri()}?mode=ro",
            uri=True,
            isolation_level=None,
            check_same_thread=False,
        )
        if read_only
        else sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    )
    try:
        problems = [row[0] for row in conn.execute("PRAGMA quick_check").fetchall()]
        if problems != ["ok"]:
            raise sqlite3.DatabaseError(" ".join(str(problems[-1]).split()))
        planted = conn.execute(
            "SELECT type, name FROM sqlite_master WHERE type IN ('view', 'trigger') LIMIT 1"
        ).fetchone()
        if planted is not None:  # hadar makes neither; a view can keep a query busy forever
            raise sqlite3.DatabaseError(
                f"a {planted[0]} {str(planted[1])[:60]!r}, which hadar never makes"
            )
        if not read_only:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise StateFileError(
            f"{path}: damaged state file ({exc}); restore it from a backup or start a new run"
        ) from None
    return conn


_EDITED = ("no such table", "no such column", "has no column named", "Could not decode")
"""How SQLite says a read met a table, column or text that a state file written by hadar has."""


@contextmanager
def reading_state(path: Path) -> Iterator[None]:
    """Reading a state file whose tables or values were edited (a table dropped, a JSON column
    overwritten, a number made text, bytes that are not UTF-8) that passed SQLite's integrity
    check: one :class:`StateFileError` naming the file, not a traceback (``--debug`` shows the
    cause). Only around code that reads the state file and inputs already checked."""
    try:
        yield
    except sqlite3.OperationalError as exc:  # also a full disk: that is not this file's damage
        if not str(exc).startswith(_EDITED):
            raise
        raise _damaged(path, exc) from exc
    except sqlite3.DatabaseError as exc:
        raise _damaged(path, exc) from exc
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # JSON or a value's type
        raise _damaged(path, exc, "a value hadar never writes: ") from exc


def _damaged(path: Path, exc: Exception, what: str = "") -> StateFileError:
    reason = what + " ".join(str(exc).split())[:200]
    return StateFileError(
        f"{path}: damaged state file ({reason}); restore it from a backup or start a new run"
    )


Hook = Callable[[], None]


class StateDb:
    """One connection to a state file, shared by the parts that write it (the Job Tracker, the
    journal, the event log): a re-entrant lock that every user holds while it talks to the
    connection, and :meth:`transaction`, whose nested uses are savepoints of the outermost.

    Hooks: ``before_commit`` ones run inside every outermost transaction just before its COMMIT
    (the event log writes its pending rows there, so events ride on the commit they belong
    to); an ``after_commit`` callback runs once, when the outermost transaction it was
    registered in commits (dropped if it rolls back): work that must never precede the commit
    (deleting checkpoints the commit made obsolete, writing lines a user reads)."""

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        self.conn = open_state_db(path, read_only=read_only)
        self.lock = threading.RLock()
        self._depth = 0
        self._before: list[Hook] = []
        self._after: list[Hook] = []

    def close(self) -> None:
        with self.lock:
            self.conn.close()

    def has_table(self, name: str) -> bool:
        with self.lock:
            row = self.conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
            ).fetchone()
        return row is not None

    def before_commit(self, hook: Hook) -> None:
        """Run ``hook`` inside every outermost transaction, just before it commits."""
        self._before.append(hook)

    def after_commit(self, hook: Hook) -> None:
        """Run ``hook`` once the current outermost transaction commits (now, outside one)."""
        with self.lock:
            if self._depth == 0:
                hook()
            else:
                self._after.append(hook)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic write transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``), rolled back if the
        block raises. Inside another one it is a savepoint: its changes are undone if the block
        raises and committed with the outer transaction."""
        with self.lock:
            if self._depth > 0:
                name = f"nested{self._depth}"
                self.conn.execute(f"SAVEPOINT {name}")
                self._depth += 1
                try:
                    yield self.conn
                    self.conn.execute(f"RELEASE {name}")
                except BaseException:
                    if self.conn.in_transaction:
                        self.conn.execute(f"ROLLBACK TO {name}")
                        self.conn.execute(f"RELEASE {name}")
                    raise
                finally:
                    self._depth -= 1
                return
            self.conn.execute("BEGIN IMMEDIATE")
            self._depth = 1
            try:
                yield self.conn
                for hook in self._before:
                    hook()
                self.conn.execute("COMMIT")
            except BaseException:
                self._after.clear()
                if self.conn.in_transaction:  # SQLite may have rolled back already (disk full)
                    self.conn.execute("ROLLBACK")
                raise
            finally:
                self._depth = 0
            after, self._after = self._after, []
            for hook in after:
                hook()
