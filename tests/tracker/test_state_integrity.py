"""State databases are integrity-checked on open (issue 17): a truncated, overwritten or
non-SQLite tracker or journal file is one line naming it, never read as less history."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from hadar.core.errors import InputError
from hadar.core.state_db import StateFileError
from hadar.runtime.journal import Journal, check_state_files


def _filled_tracker(env) -> None:
    t = env.open()
    for j in range(8):
        t.register_job(j, 100 + j, model="MM", size="tiny")
        t.register_copies(j, 3)
    for r in range(4):
        t.open_round(r)
        t.close_round(r)
    t.close()


def _damage(path: Path, how: str) -> None:
    size = path.stat().st_size
    if how == "truncated":
        with path.open("r+b") as fh:
            fh.truncate(size // 2)
    elif how == "page-overwritten":
        conn = sqlite3.connect(path)
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        conn.close()
        with path.open("r+b") as fh:
            fh.seek(page)
            fh.write(b"\xa5" * 32)
    else:  # not a database at all
        path.write_bytes(b"this is not a database, just text " * 200)


@pytest.mark.parametrize("how", ["truncated", "page-overwritten", "garbage"])
def test_a_damaged_tracker_is_refused_naming_it_and_left_as_it_was(env, how: str) -> None:
    _filled_tracker(env)
    assert env.db.stat().st_size > 8192
    _damage(env.db, how)
    before = env.db.read_bytes()
    with pytest.raises(StateFileError) as err:
        env.open()
    msg = str(err.value)
    assert isinstance(err.value, InputError) and "\n" not in msg
    assert msg.startswith(f"{env.db.resolve()}: damaged state file (") and msg.endswith(
        "start a new run"
    )
    assert env.db.read_bytes() == before
    with pytest.raises(StateFileError):  # the lock was released: a second open gets the same answer
        env.open()


def test_an_intact_tracker_reopens(env) -> None:
    _filled_tracker(env)
    t = env.open()
    assert t.last_closed_round() == 3 and len(t.jobs()) == 8
    t.close()


def _filled_journal(path: Path, rounds: int) -> None:
    j = Journal(path)
    for r in range(rounds):
        j.plan_round(r, 0, [{"job": 0, "note": "x" * 400}] * 20, time.time(), 0.01)
        j.close_round(r, time.time(), {"copies": []})
    j.close()


@pytest.mark.parametrize("how", ["truncated", "page-overwritten", "garbage"])
def test_a_damaged_journal_is_refused_naming_it(tmp_path: Path, how: str) -> None:
    path = tmp_path / "journal.sqlite"
    _filled_journal(path, 30)
    _damage(path, how)
    with pytest.raises(StateFileError, match=rf"^{path}: damaged state file \("):
        Journal(path)


def test_journal_and_tracker_must_agree_on_the_rounds(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    tracker = tmp_path / "tracker.sqlite"
    _filled_journal(path, 3)
    j = Journal(path)
    try:
        check_state_files(j, 2, tracker)  # consistent
        with pytest.raises(
            StateFileError, match=rf"^{tracker}: has no record of round 2, which journal.sqlite"
        ):
            check_state_files(j, None, tracker)
        with pytest.raises(StateFileError, match=rf"^{tracker}: has no record of round 2"):
            check_state_files(j, 1, tracker)
        with pytest.raises(
            StateFileError, match=rf"^{path}: has no record of round 5, which tracker.sqlite"
        ):
            check_state_files(j, 5, tracker)
    finally:
        j.close()
