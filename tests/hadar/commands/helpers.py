"""Hostile paths and the check of a refused command shared by the CLI tests."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.fixtures.cli import one_error_line
from tests.fixtures.filesystems import fill, small_tmpfs

LONG_NAME = "x" * 300
"""One path component over the 255 bytes a file name may have."""
DEEP = "/".join(["d"] * 3000)
"""3,000 components: a path over the 4,096 bytes a path may have."""


def refused(res: subprocess.CompletedProcess[str], *needles: str) -> str:
    """The one error line of a command refused with exit 2 (no traceback), short, holding
    ``needles``."""
    assert res.returncode == 2, res.stderr
    line = one_error_line(res)
    assert line.startswith("hadar: error: ")
    assert len(line) < 250, line
    for needle in needles:
        assert needle in line, line
    return line


def folder_entries(out: Path) -> dict[str, str]:
    """Every entry in ``out``, hidden ones too: a regular file's text, else its kind (what a
    refused or failed save must leave as it found)."""
    return {
        p.name: p.read_text() if p.is_file() else "FIFO" if p.is_fifo() else "folder"
        for p in sorted(out.iterdir())
    }


def previous_results(out: Path, names: tuple[str, ...] | list[str], what: str) -> None:
    """``out`` holding an earlier save's ``names``, each saying it is ``what``'s."""
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        (out / name).write_text(f"the previous {what}'s {name}\n")


def save_on_a_full_filesystem(
    tmp_path: Path, names: tuple[str, ...] | list[str], what: str, run: Callable[[Path], int]
) -> tuple[Path, int, dict[str, str], dict[str, str]]:
    """``run(out)`` on a full filesystem whose ``out`` holds an earlier save of ``names``: the
    folder, the exit code, and ``out``'s entries before and after."""
    with small_tmpfs(tmp_path / "fs") as fs:
        out = fs / "out"
        previous_results(out, names, what)
        before = folder_entries(out)
        fill(fs)
        code = run(out)
        after = folder_entries(out)
    return out, code, before, after
