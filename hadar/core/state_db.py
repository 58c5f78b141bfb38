"""Opening the SQLite files that hold a run's state, refusing damaged ones.

``journal.sqlite`` and ``tracker.sqlite`` are the authority on what a run has done; a file that
was truncated, overwritten or bit-flipped must stop the run with one line naming it, never be
read as "less history" or silently recreated.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hadar.core.errors import InputError


class StateFileError(InputError):
    """A state database is damaged (fails SQLite's integrity check or is not a database)."""


def open_state_db(path: Path, *, read_only: bool = False) -> sqlite3.Connection:
    """Connect to ``path`` (WAL, synchronous=FULL, autocommit) after ``PRAGMA quick_check``;
    :class:`StateFileError` naming the file if it is damaged. ``read_only``: an existing file,
    opened so that nothing can write it (a reader beside the process that writes it)."""
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
        if not read_only:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise StateFileError(
            f"{path}: damaged state file ({exc}); restore it from a backup or start a new run"
        ) from None
    return conn
