"""Every ``hadar`` command ends cleanly on SIGTERM and SIGHUP (one line, exit 128 + the signal),
as on Ctrl-C, and a SIGHUP that ``nohup`` ignores stays ignored (issue 28 item 6). Real
processes, real signals; ``hadar run``'s own handling is tested in tests/e2e/test_run_stops.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures.processes import HANG_S

LONG = ["simulate", "--workload", "philly-2000", "--no-progress", "--out", "out"]
"""A simulation that runs for many seconds."""


def start(tmp_path: Path, ignore_hup: bool = False) -> subprocess.Popen[str]:
    def ignore() -> None:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    return subprocess.Popen(
        [sys.executable, "-m", "hadar", *LONG],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ignore if ignore_hup else None,
    )


def wait_until_running(proc: subprocess.Popen[str]) -> None:
    """Until the CLI has installed its SIGTERM handler (the process's caught-signal mask)."""
    end = time.monotonic() + HANG_S
    while time.monotonic() < end and proc.poll() is None:
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text()
        except OSError:
            break
        caught = int(next(x for x in status.splitlines() if x.startswith("SigCgt:")).split()[1], 16)
        if caught >> (signal.SIGTERM - 1) & 1:
            return
        time.sleep(0.02)
    raise AssertionError("the command did not start")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_command_ends_with_one_line_and_128_plus_the_signal(tmp_path: Path, sig) -> None:
    proc = start(tmp_path)
    try:
        wait_until_running(proc)
        os.kill(proc.pid, sig)
        _, err = proc.communicate(timeout=HANG_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig, err
    assert err.strip() == f"hadar: interrupted ({sig.name})"


def test_a_sighup_nohup_ignores_stays_ignored(tmp_path: Path) -> None:
    proc = start(tmp_path, ignore_hup=True)
    try:
        wait_until_running(proc)
        # both signals pending at once, however fast the machine: a SIGHUP not ignored would be
        # handled first (Linux delivers and Python runs handlers lowest number first), exit 129
        os.kill(proc.pid, signal.SIGHUP)
        os.kill(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=HANG_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
