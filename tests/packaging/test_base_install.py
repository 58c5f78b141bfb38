"""The base install simulates and compares; every command that needs an extra says which.

"Without an extra" is real, not mocked: each CLI call runs in a fresh interpreter whose import
system refuses the optional packages (torch, paramiko, boto3, matplotlib, ray), exactly as a
``pip install hadar-scheduler`` without extras would. The last test installs a built wheel into
a fresh venv and simulates with the defaults from outside the checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from hadar.core.extras import extras_of_modules

ROOT = Path(__file__).resolve().parents[2]

BLOCKED_RUN = """
import importlib.abc, sys
BLOCKED = set(sys.argv[1].split(","))
class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NotInstalled())
from hadar.cli import main
raise SystemExit(main(sys.argv[2:]))
"""


def _hadar_without(blocked: set[str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-c", BLOCKED_RUN, ",".join(sorted(blocked)), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


OPTIONAL = set(extras_of_modules())


def test_simulate_and_compare_run_with_no_extra_installed(tmp_path):
    sim = _hadar_without(
        OPTIONAL,
        "simulate",
        "--workload",
        "philly-8",
        "--out",
        "sim",
        "--no-progress",
        cwd=tmp_path,
    )
    assert sim.returncode == 0, sim.stderr
    assert json.loads((tmp_path / "sim" / "summary.json").read_text())["completed"] == 8
    cmp = _hadar_without(
        OPTIONAL,
        "compare",
        "--workload",
        "philly-8",
        "--policies",
        "hadar,gavel",
        "--decision-sizes",
        "32",
        "--out",
        "cmp",
        cwd=tmp_path,
    )
    assert cmp.returncode == 0, cmp.stderr
    assert (
        "figures not drawn: matplotlib is not installed (pip install 'hadar-scheduler[plots]')"
        in cmp.stdout
    )
    assert (tmp_path / "cmp" / "compare.csv").is_file()
    assert not list((tmp_path / "cmp").glob("*.png"))  # skipped, and said so, not half-drawn


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (("run", "--workload", "M-1", "--out", "r"), "train"),
        (("report", "r"), "train"),
        (("cluster", "status", "--config", "aws-5node"), "aws"),
    ],
)
def test_a_command_that_needs_an_extra_names_it_in_one_line(args, extra, tmp_path):
    if args[0] == "cluster":
        args = (*args[:-1], str(ROOT / "cluster_configs" / "aws-5node.yaml"))
    result = _hadar_without(OPTIONAL, *args, cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert f"pip install 'hadar-scheduler[{extra}]'" in lines[0]


def test_an_ssh_cluster_without_paramiko_names_the_file_and_the_extra(tmp_path):
    cluster = tmp_path / "lab.yaml"
    cluster.write_text(
        "name: lab\nprovider: ssh\nnodes:\n  - {name: n1, address: 127.0.0.1, gpus: {v100: 1}}\n"
    )
    result = _hadar_without(
        OPTIONAL - {"torch"}, "nodes", "check", "--cluster", str(cluster), cwd=tmp_path
    )
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert str(cluster) in line and "the ssh provider" in line and "hadar-scheduler[ssh]" in line


@pytest.mark.slow
def test_a_built_wheel_installs_in_a_fresh_venv_and_simulates_with_defaults(tmp_path):
    """pip install of the wheel (base dependencies only, from the package index), then
    ``hadar simulate`` with the bundled cluster, run from a directory that is not the checkout."""
    source = tmp_path / "src"  # a copy: building writes build/ and *.egg-info next to the sources
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".venv",
            ".git",
            "build",
            "*.egg-info",
            "__pycache__",
            ".hypothesis",
            ".whl",
            "runs",
            "out",
        ),
    )
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(wheels),
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("hadar_scheduler-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    # outside the checkout: with PYTHONPATH naming it, pip would take its hadar_scheduler.egg-info
    # for an installed hadar-scheduler and install nothing
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # --no-compile: pip would byte-compile every module of the base dependencies (about 20 s of
    # CPU, two thirds of the install); the simulation below compiles what it imports
    pip = subprocess.run(
        [str(env_dir / "bin" / "pip"), "install", "-q", "--no-compile", str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    if pip.returncode != 0 and "NewConnectionError" in pip.stderr + pip.stdout:
        pytest.skip("the package index is unreachable from this machine")
    assert pip.returncode == 0, pip.stderr
    work = tmp_path / "elsewhere"
    work.mkdir()
    sim = subprocess.run(
        [
            str(env_dir / "bin" / "hadar"),
            "simulate",
            "--workload",
            "philly-8",
            "--out",
            "o",
            "--no-progress",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert sim.returncode == 0, sim.stderr
    summary = json.loads((work / "o" / "summary.json").read_text())
    assert summary["cluster"] == "sim-60gpu" and summary["completed"] == 8
    probe = subprocess.run(
        [str(env_dir / "bin" / "python"), "-c", "import torch"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    assert probe.returncode != 0  # the base install really is torch-free
