"""``hadar reproduce`` saving its two files: both are checked before the experiment runs, and a
refused or failed save is one line naming the file, exit 2, with the previous files as they were
(a FIFO planted as one of them, a full filesystem; real ones)."""

from __future__ import annotations

import os
from pathlib import Path

from hadar.cli import main
from tests.hadar.commands.helpers import folder_entries, previous_results, save_on_a_full_filesystem

FILES = ("reproduce.json", "reproduce.md")


def _reproduce(out: Path) -> int:
    """Hadar's quick reproduction (about a second)."""
    return main(["reproduce", "hadar", "--quick", "--workers", "1", "--out", str(out)])


def test_a_planted_fifo_refuses_the_reproduction_before_it_runs(tmp_path, capsys):
    out = tmp_path / "out"
    previous_results(out, FILES, "reproduction")
    (out / "reproduce.md").unlink()
    os.mkfifo(out / "reproduce.md")
    before = folder_entries(out)
    assert _reproduce(out) == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        f"hadar: error: {out}/reproduce.md: is a FIFO, not a regular file; "
        "hadar writes only regular files"
    ]  # and no "note: replacing the results" before it
    assert "set-up:" not in captured.out  # the experiment did not run
    assert folder_entries(out) == before


def test_a_full_filesystem_keeps_the_previous_reproduction_whole(tmp_path, capsys):
    out, code, before, after = save_on_a_full_filesystem(
        tmp_path, FILES, "reproduction", _reproduce
    )
    assert code == 2
    assert after == before  # no new file, no temporary file or staging folder left
    assert capsys.readouterr().err.strip().splitlines() == [
        f"note: replacing the results in {out}/",  # the checks passed: the experiment ran
        f"hadar: error: {out}/reproduce.json: cannot write: No space left on device",
    ]
