"""The commands that take a run directory (``hadar status``, ``logs``, ``report``, ``run
--resume``): one that the system cannot look up (a name over 255 bytes, a symbolic link loop) is
one line naming it a run directory, exit 2, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.cli import hadar_cli
from tests.hadar.commands.helpers import LONG_NAME, refused

COMMANDS = [("status",), ("logs",), ("report",), ("run", "--resume")]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_run_directory_name_over_255_bytes(tmp_path: Path, command) -> None:
    line = refused(hadar_cli(*command, LONG_NAME, cwd=tmp_path), "error: run directory: xxx")
    assert "file name too long" in line and LONG_NAME not in line


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_run_directory_in_a_symbolic_link_loop(tmp_path: Path, command) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    refused(hadar_cli(*command, "a", cwd=tmp_path), "error: run directory: a", "symbolic link loop")
