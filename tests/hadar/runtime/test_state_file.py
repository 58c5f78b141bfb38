"""A run directory's one state file: opened for a new run, refused (one line) for a run
directory of the older layout and when emptied beside checkpoints of rounds it lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from hadar.core.errors import InputError
from hadar.core.state_db import StateFileError
from hadar.runtime.state_file import last_checkpoint_round, open_run_state


def test_a_new_run_directory_gets_an_empty_state_file(tmp_path: Path) -> None:
    db = open_run_state(tmp_path)
    try:
        assert db.path == tmp_path / "state.sqlite" and db.path.is_file()
        assert not db.has_table("meta")
    finally:
        db.close()


@pytest.mark.parametrize("files", [("journal.sqlite", "tracker.sqlite"), ("tracker.sqlite",)])
def test_an_older_layout_is_refused_naming_it_and_left_as_it_was(
    tmp_path: Path, files: tuple[str, ...]
) -> None:
    for name in files:
        (tmp_path / name).write_bytes(b"old state " + name.encode())
    with pytest.raises(InputError) as err:
        open_run_state(tmp_path)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"{tmp_path}: made by an older version of hadar")
    assert " and ".join(files) in msg and "start a new run with --out" in msg
    assert not (tmp_path / "state.sqlite").exists()  # nothing created, nothing migrated
    assert {n: (tmp_path / n).read_bytes() for n in files} == {
        n: b"old state " + n.encode() for n in files
    }


def test_an_emptied_state_file_beside_checkpoints_is_refused(tmp_path: Path) -> None:
    job = tmp_path / "checkpoints" / "job-3"
    job.mkdir(parents=True)
    for name in (f"round-000004-{'a' * 64}.pt", f"round-000012-{'b' * 64}.pt", "notes.txt"):
        (job / name).write_bytes(b"x")
    assert last_checkpoint_round(tmp_path / "checkpoints") == 12
    (tmp_path / "state.sqlite").write_bytes(b"")
    with pytest.raises(StateFileError) as err:
        open_run_state(tmp_path)
    assert str(err.value) == (
        f"{tmp_path / 'state.sqlite'}: has no record of round 12, which "
        f"{tmp_path / 'checkpoints'} holds a checkpoint of (the file was truncated or replaced)"
    )
    assert len(list(job.iterdir())) == 3  # nothing deleted


def test_reading_a_directory_without_a_state_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"state.sqlite: no state file"):
        open_run_state(tmp_path, read_only=True)
    assert not (tmp_path / "state.sqlite").exists()
