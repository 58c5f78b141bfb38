"""The input files a command reads (``--workload``, ``--cluster``, ``--throughputs``,
``--node-stream``, a positional log), looked up before any work (``hadar/commands/options.py``):
a path the system cannot look up is one line naming the option, the path cut and why, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.cli import hadar_cli
from tests.hadar.commands.helpers import DEEP, LONG_NAME, refused

SIMULATE = ("simulate", "--workload", "philly-5", "--cluster", "sim-60gpu")


@pytest.mark.parametrize("flag", ["--workload", "--cluster", "--throughputs", "--node-stream"])
def test_an_input_name_over_255_bytes_names_its_option(tmp_path: Path, flag: str) -> None:
    res = hadar_cli(*SIMULATE, flag, LONG_NAME + ".csv", "--out", "o", cwd=tmp_path)
    line = refused(res, f"error: {flag}: xxx", "...", "x.csv: file name too long")
    assert LONG_NAME not in line
    assert not (tmp_path / "o").exists()


def test_an_input_path_over_4096_bytes_names_its_option(tmp_path: Path) -> None:
    res = hadar_cli(*SIMULATE, "--workload", DEEP + ".csv", "--out", "o", cwd=tmp_path)
    refused(res, "error: --workload: d/d/", "...", "d/d.csv: file name too long")


def test_a_symbolic_link_loop_is_not_reported_missing(tmp_path: Path) -> None:
    (tmp_path / "jobs.csv").symlink_to("other.csv")
    (tmp_path / "other.csv").symlink_to("jobs.csv")
    res = hadar_cli(*SIMULATE, "--workload", "jobs.csv", "--out", "o", cwd=tmp_path)
    line = refused(res, "error: --workload: jobs.csv: a symbolic link loop")
    assert "not found" not in line


@pytest.mark.parametrize(
    "command, needle",
    [
        (("node-stream", "from-slurm", LONG_NAME, "-o", "s.csv"), "error: log: xxx"),
        (("node-stream", "stats", LONG_NAME), "error: node stream: xxx"),
        (("node-stream", "generate", "--cluster", LONG_NAME, "-o", "s.csv"), "error: --cluster"),
        (("run", "--cluster", LONG_NAME, "--workload", "philly-5"), "error: --cluster: xxx"),
        (("nodes", "check", "--cluster", LONG_NAME), "error: cluster file: xxx"),
    ],
    ids=["from-slurm log", "stats stream", "generate --cluster", "run --cluster", "nodes check"],
)
def test_other_commands_refuse_a_long_input_name(tmp_path: Path, command, needle: str) -> None:
    line = refused(hadar_cli(*command, cwd=tmp_path), needle, "file name too long")
    assert LONG_NAME not in line
    assert list(tmp_path.iterdir()) == []
