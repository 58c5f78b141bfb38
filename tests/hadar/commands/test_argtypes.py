"""Output paths and numbers checked where they enter (``hadar/commands/argtypes.py``), through the
real CLI: a path the system cannot look up (a name over 255 bytes, a path over 4,096 bytes, a
symbolic link loop) and an absurdly long value are one short line and exit 2, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from hadar.core.errors import SHOWN_CHARS
from tests.fixtures.cli import hadar_cli
from tests.hadar.commands.helpers import DEEP, LONG_NAME, refused

OUT_COMMANDS = [
    ("simulate", "--workload", "philly-5", "--out"),
    ("compare", "--workload", "philly-5", "--out"),
    ("node-stream", "generate", "--cluster", "sim-60gpu", "-o"),
    ("export-gavel", "--workload", "philly-5", "--out"),
]


@pytest.mark.parametrize("command", OUT_COMMANDS, ids=lambda c: c[0] + " " + c[-1])
def test_an_output_name_over_255_bytes_is_one_line(tmp_path: Path, command) -> None:
    out = tmp_path / LONG_NAME
    line = refused(hadar_cli(*command, str(out), cwd=tmp_path), "file name too long")
    assert "argument --out" in line and LONG_NAME not in line
    assert line.count("x") <= SHOWN_CHARS  # the path cut, its end kept
    assert list(tmp_path.iterdir()) == []


def test_an_output_path_over_4096_bytes_is_one_line(tmp_path: Path) -> None:
    res = hadar_cli("simulate", "--workload", "philly-5", "--out", DEEP, cwd=tmp_path)
    line = refused(res, "argument --out: d/d/", "...", "file name too long")
    assert DEEP not in line
    assert list(tmp_path.iterdir()) == []


def test_an_output_through_a_symbolic_link_loop_is_named_so(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    for command in (("simulate", "--workload", "philly-5", "--out"), ("export-gavel", "--out")):
        res = hadar_cli(*command, "a/o", cwd=tmp_path)
        refused(res, "argument --out: a/o: a symbolic link loop")


@pytest.mark.parametrize("flag", ["--round", "--horizon", "--seed"])
def test_a_long_number_is_echoed_cut(tmp_path: Path, flag: str) -> None:
    value = "7" * 5000
    line = refused(hadar_cli("simulate", flag, value, cwd=tmp_path), f"argument {flag}")
    assert f"'{'7' * SHOWN_CHARS}...'" in line
