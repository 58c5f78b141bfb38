"""Output wraps only on a terminal: a file or a pipe (``run.log``, CI logs) gets whole lines,
so paths and resume commands stay whole; a terminal gets lines and tables that fit its width."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.fixtures.terminal import on_terminal

ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _lines(text: str) -> list[str]:
    return ESCAPES.sub("", text).splitlines()


def _piped(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run(
        [sys.executable, "-m", "hadar", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        start_new_session=True,  # its own group: nothing of it outlives a timeout's kill
    )


def test_a_long_path_stays_on_one_line_in_a_pipe_and_wraps_on_a_terminal(tmp_path: Path) -> None:
    out = tmp_path / ("results-" + "x" * 90) / "philly"
    argv = ["simulate", "--workload", "philly-4", "--no-progress", "--out", str(out)]
    piped = _piped(*argv, cwd=tmp_path)
    assert piped.returncode == 0, piped.stderr
    assert f"results written to {out}/" in piped.stdout.splitlines()
    code, text = on_terminal(*argv, cwd=tmp_path, columns=80)
    assert code == 0, text
    lines = _lines(text)
    start = next(i for i, line in enumerate(lines) if line.startswith("results written to"))
    assert len(lines[start]) <= 80 and len(lines[start + 1]) <= 80  # wrapped to fit
    assert "".join(lines[start:]).startswith(f"results written to {out}/")


def test_estimate_error_tables_fit_an_80_column_terminal(tmp_path: Path) -> None:
    code, text = on_terminal("estimate-error", "--variants", cwd=tmp_path, columns=80)
    assert code == 0, text
    lines = _lines(text)
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    rows = [line for line in lines if line.startswith("│")]
    assert len(rows) > 20 and all(line.rstrip().endswith("│") for line in rows)  # none cut off
    assert sum(line.startswith("┏") for line in lines) == 7  # every table drawn
