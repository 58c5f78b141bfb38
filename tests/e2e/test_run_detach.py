"""Background runs: ``hadar run --detach`` returns at once, ``hadar status`` shows the run,
``hadar logs`` its output and ``hadar stop`` stops it cleanly (as a first Ctrl-C does: the
log ends with the resume hint). Real coordinator, real local workers."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from hadar.commands.background import STARTUP_WAIT_S, running_pid
from tests.e2e.runlib import events, hadar, run_to_end, wait_for, write_jobs
from tests.fixtures.processes import HANG_S

pytestmark = pytest.mark.slow
WIDE = {"COLUMNS": "250"}
DETACH_S = STARTUP_WAIT_S + HANG_S
"""``--detach`` returns once the run has started, which it waits up to ``STARTUP_WAIT_S`` for."""


def test_detach_status_logs_stop(tmp_path: Path) -> None:
    jobs = write_jobs(tmp_path / "jobs.yaml", {"MM": 1_000_000})  # outlasts the test anywhere
    out = tmp_path / "run"
    started = run_to_end(
        out, jobs, "--detach", "--policy", "hadar", "--round", "3", timeout=DETACH_S, live=True
    )
    assert started.returncode == 0, started.stdout + started.stderr
    pid = running_pid(out)
    assert pid is not None and f"in the background (pid {pid})" in started.stdout
    assert f"hadar stop {out}" in started.stdout
    try:
        status = hadar("status", str(out), timeout=HANG_S, env=WIDE)
        assert status.returncode == 0 and f"running (pid {pid})" in status.stdout
        wait_for(lambda: any(e["event"] == "dispatch" for e in events(out)), 300, "a round")
        stop = hadar("stop", str(out), "--timeout", "300", timeout=400)
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert f"stopped by SIGINT; continue with: hadar run --resume {out}" in stop.stdout
    finally:
        if running_pid(out) is not None:
            os.kill(pid, signal.SIGKILL)
    assert running_pid(out) is None
    log = hadar("logs", str(out), timeout=HANG_S)
    assert log.returncode == 0 and "stopped cleanly; state saved" in log.stdout
    assert "round 0:" in log.stdout  # one line per round (no live view in the background)
    follow = hadar("logs", str(out), "-f", timeout=HANG_S)  # the run has ended: -f returns at once
    assert follow.returncode == 0 and follow.stdout == log.stdout
    status = hadar("status", str(out), timeout=HANG_S, env=WIDE)
    assert "stopped" in status.stdout and "running" not in status.stdout
    again = hadar("stop", str(out), timeout=HANG_S)
    assert again.returncode == 2 and "no background run is running there" in again.stderr


def test_a_detached_run_that_fails_on_its_inputs_says_so_at_once(tmp_path: Path) -> None:
    out = tmp_path / "bad"
    res = run_to_end(
        out, tmp_path / "none.yaml", "--detach", timeout=DETACH_S, live=True, evaluate=True
    )
    assert res.returncode == 2
    assert "none.yaml" in res.stdout and "the background run exited with code 2" in res.stdout
    assert not (out / "run.json").exists()
