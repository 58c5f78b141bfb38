"""``scripts/demo`` installs only what running hadar needs (``scripts/bootstrap --runtime``:
torch and matplotlib, not the developer toolchain); ``scripts/bootstrap`` alone installs the test
extras. The script runs for real in a copy of the repository's files, with a ``pip`` that
records what it is asked to install instead of downloading it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[2]

RECORDING_PIP = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/../pip.log"
"""


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "bootstrap", repo / "scripts" / "bootstrap")
    shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")
    bin_dir = repo / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("pip", "python"):
        (bin_dir / name).write_text(RECORDING_PIP)
        (bin_dir / name).chmod(0o755)
    return repo


def _bootstrap(repo: Path, *args: str) -> list[str]:
    """The pip command lines one ``scripts/bootstrap ARGS`` ran."""
    log = repo / ".venv" / "pip.log"
    log.unlink(missing_ok=True)
    subprocess.run(
        ["bash", str(repo / "scripts" / "bootstrap"), *args],
        check=True,
        timeout=60,
        env={**os.environ, "PYTHON": "false"},  # the .venv exists: never created again
    )
    return log.read_text().splitlines() if log.exists() else []


def test_the_demo_installs_the_runtime_only(tmp_path: Path) -> None:
    demo = (ROOT / "scripts" / "demo").read_text()
    assert "scripts/bootstrap --runtime\n" in demo
    repo = _repo(tmp_path)
    runtime = _bootstrap(repo, "--runtime")
    assert runtime == ["install -q torch==2.13.0", "install -q -e .[train,plots]"]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    installed = " ".join(extras["train"] + extras["plots"])
    for tool in ("pytest", "mypy", "moto", "ray", "ruff", "stubs"):
        assert tool not in installed, tool  # the developer toolchain stays out
    assert _bootstrap(repo, "--runtime") == []  # installed: nothing to do
    # the development install adds the test extras, and then satisfies --runtime too
    assert _bootstrap(repo) == ["install -q torch==2.13.0", "install -q -e .[test]"]
    assert _bootstrap(repo) == [] and _bootstrap(repo, "--runtime") == []
    later = os.path.getmtime(repo / ".venv" / ".hadar-installed") + 10
    os.utime(repo / "pyproject.toml", (later, later))  # changed since: installed again
    assert _bootstrap(repo, "--runtime")[-1] == "install -q -e .[train,plots]"


def test_bootstrap_refuses_an_unknown_option(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    res = subprocess.run(
        ["bash", str(repo / "scripts" / "bootstrap"), "--everything"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and res.stderr.strip() == "usage: scripts/bootstrap [--runtime]"
    assert not (repo / ".venv" / "pip.log").exists()
