"""``StateDb``: one connection to a state file shared by its writers, whose nested transactions
are savepoints of the outermost one and whose hooks run at its commit only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hadar.core.state_db import StateDb, StateFileError, open_state_db


def _db(tmp_path: Path) -> StateDb:
    db = StateDb(tmp_path / "state.sqlite")
    db.conn.execute("CREATE TABLE t (x INTEGER)")
    return db


def _rows(path: Path) -> list[int]:
    other = StateDb(path, read_only=True)  # another reader sees committed rows only
    try:
        return [r[0] for r in other.conn.execute("SELECT x FROM t ORDER BY x")]
    finally:
        other.close()


def test_nested_transactions_commit_with_the_outer_one_and_roll_back_alone(
    tmp_path: Path,
) -> None:
    db = _db(tmp_path)
    with db.transaction() as c:
        c.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(ValueError), db.transaction() as inner:
            inner.execute("INSERT INTO t VALUES (2)")
            raise ValueError("the inner block fails")
        with db.transaction() as inner:
            inner.execute("INSERT INTO t VALUES (3)")
        assert _rows(db.path) == []  # nothing is visible before the outer commit
    assert _rows(db.path) == [1, 3]
    with pytest.raises(RuntimeError), db.transaction() as c:
        c.execute("INSERT INTO t VALUES (4)")
        with db.transaction() as inner:
            inner.execute("INSERT INTO t VALUES (5)")
        raise RuntimeError("the outer block fails: its savepoints' rows go too")
    assert _rows(db.path) == [1, 3]
    db.close()


def test_hooks_run_at_the_outermost_commit_and_after_commit_ones_not_after_a_rollback(
    tmp_path: Path,
) -> None:
    db = _db(tmp_path)
    seen: list[str] = []
    db.before_commit(lambda: seen.append(f"before, {len(_rows(db.path))} rows committed"))
    db.after_commit(lambda: seen.append("outside a transaction: at once"))
    with db.transaction() as c:
        c.execute("INSERT INTO t VALUES (1)")
        with db.transaction():
            db.after_commit(lambda: seen.append(f"after, {len(_rows(db.path))} rows committed"))
        assert seen == ["outside a transaction: at once"]
    assert seen[1:] == ["before, 0 rows committed", "after, 1 rows committed"]
    seen.clear()
    with pytest.raises(RuntimeError), db.transaction():
        db.after_commit(lambda: seen.append("never"))
        raise RuntimeError("rolled back")
    with db.transaction():
        pass
    assert seen == ["before, 1 rows committed"]  # the rolled-back one's hook was dropped
    db.close()


@pytest.mark.parametrize("kind", ["FIFO", "folder"])
@pytest.mark.parametrize("read_only", [False, True])
def test_a_state_path_that_is_not_a_regular_file_is_refused_before_sqlite_opens_it(
    tmp_path: Path, kind: str, read_only: bool
) -> None:
    # a FIFO made SQLite's open wait for a writer forever (hadar report hung, deaf to SIGTERM)
    path = tmp_path / "state.sqlite"
    os.mkfifo(path) if kind == "FIFO" else path.mkdir()
    with pytest.raises(StateFileError, match=f"state.sqlite: is a {kind}, not a regular file"):
        open_state_db(path, read_only=read_only)


@pytest.mark.parametrize("suffix", ["-journal", "-wal", "-shm"])
@pytest.mark.parametrize("read_only", [False, True])
def test_a_fifo_beside_the_state_file_is_refused_before_sqlite_opens_it(
    tmp_path: Path, suffix: str, read_only: bool
) -> None:
    """SQLite opens its journal beside the file with a plain open(): a FIFO planted at
    ``state.sqlite-journal`` hung hadar status, report and --resume, deaf to SIGTERM."""
    path = tmp_path / "state.sqlite"
    open_state_db(path).close()  # a real state file
    os.mkfifo(tmp_path / f"state.sqlite{suffix}")
    with pytest.raises(
        StateFileError,
        match=f"state.sqlite{suffix}: is a FIFO, not a regular file; SQLite keeps its journal "
        "of state.sqlite there",
    ):
        open_state_db(path, read_only=read_only)
