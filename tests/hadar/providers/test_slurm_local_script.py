"""``scripts/slurm-local down`` leaves nothing of its cluster running, not even the step daemon
of a job still running: a second local Slurm in a folder of its own, so the suite's shared one
is not disturbed."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.slurm import SCRIPT, LocalSlurm

pytestmark = pytest.mark.slurm


def _live(conf: Path, command: str) -> list[int]:
    """The live processes named ``command`` whose environment points at the cluster of ``conf``
    (a step daemon, and the task it runs: srun exports its environment to it)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "comm").read_text().strip() != command:
                continue
            if (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue  # already dead, waiting for its parent to reap it
            env = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"SLURM_CONF={conf}".encode() in env:
            found.append(int(proc.name))
    return found


@pytest.fixture
def second_cluster(slurm_cluster: LocalSlurm) -> Iterator[Path]:
    """A second local Slurm (the packages are there: ``slurm_cluster`` installed them), in a
    short folder under /tmp (munge's socket path must fit AF_UNIX's limit)."""
    directory = Path(tempfile.mkdtemp(prefix="hs-", dir="/tmp"))
    env = {**os.environ, "HADAR_SLURM_DIR": str(directory)}
    try:
        subprocess.run(
            [str(SCRIPT), "up"], env=env, capture_output=True, text=True, timeout=120, check=True
        )
        yield directory
    finally:
        subprocess.run([str(SCRIPT), "down"], env=env, capture_output=True, timeout=60)
        shutil.rmtree(directory, ignore_errors=True)
        Path(f"{directory}.lock").unlink(missing_ok=True)  # the script's own lock file


def test_down_stops_the_step_daemons_of_running_jobs(second_cluster: Path) -> None:
    conf = second_cluster / "slurm.conf"
    env = {**os.environ, "SLURM_CONF": str(conf), "HADAR_SLURM_DIR": str(second_cluster)}
    step = subprocess.Popen(
        ["srun", "-N1", "-n1", "sleep", "300"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not _live(conf, "slurmstepd") and time.monotonic() < deadline:
            assert step.poll() is None, "srun ended before its step started"
            time.sleep(0.2)
        started = _live(conf, "slurmstepd")
        assert started, "no step daemon started within 60 s"

        down = subprocess.run(
            [str(SCRIPT), "down"], env=env, capture_output=True, text=True, timeout=60
        )
        assert down.returncode == 0, down.stderr
        assert down.stderr == ""  # scanning /proc reports no process it could not read

        assert _live(conf, "slurmstepd") == []
        assert _live(conf, "sleep") == []  # the step's task went with its daemon
    finally:
        os.killpg(step.pid, signal.SIGKILL)  # srun and the helper it forks
        step.wait(timeout=30)
