"""hadar.simulator.output: a simulation's files are one save, replaced all together or not at
all (real files, a real FIFO, a real full filesystem)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hadar import simulate
from hadar.core.errors import InputError
from hadar.simulator.output import RUN_FILES
from tests.fixtures.filesystems import fill, small_tmpfs


def _files(folder: Path) -> dict[str, bytes]:
    """Every entry in ``folder``, hidden ones too: a regular file's bytes, else its kind."""
    return {
        p.name: p.read_bytes() if p.is_file() and not p.is_symlink() else b"not a file"
        for p in sorted(folder.iterdir())
    }


def test_saving_over_a_planted_fifo_replaces_none_of_the_run_files(tmp_path):
    out = tmp_path / "out"
    simulate("sim-60gpu", "philly-4", "hadar").save(out)
    (out / "rounds.csv").unlink()
    os.mkfifo(out / "rounds.csv")
    before = _files(out)
    later = simulate("sim-60gpu", "philly-6", "hadar")
    with pytest.raises(InputError, match=r"out/rounds.csv: is a FIFO, not a regular file"):
        later.save(out)
    assert _files(out) == before


def test_saving_into_a_full_filesystem_keeps_the_previous_run(tmp_path):
    with small_tmpfs(tmp_path / "fs", size="1m") as fs:
        out = fs / "out"
        simulate("sim-60gpu", "philly-4", "hadar").save(out)
        before = _files(out)
        fill(fs)
        with pytest.raises(InputError) as refused:
            simulate("sim-60gpu", "philly-6", "hadar").save(out)
        assert _files(out) == before  # no temporary file, no staging folder either
    path, _, reason = str(refused.value).partition(": ")
    assert Path(path).parent == out and Path(path).name in RUN_FILES
    assert reason == "cannot write: No space left on device"
