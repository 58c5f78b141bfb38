"""``hadar stop`` escalates: SIGINT, then SIGTERM after ``--timeout``, then SIGKILL of the run's
process group after ``--grace``, and says which signal stopped the run. The stand-in runs are
real processes in a session of their own (as ``--detach`` starts them) whose command line is a
``run`` naming the directory, ignoring the signals a launcher may have ignored; one has a
child in its process group, which must go with it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures.cli import hadar_cli
from tests.fixtures.processes import HANG_S, kill_group


def stand_in(folder: Path) -> str:
    """A script named ``hadar`` running :data:`STAND_IN`: its command line reads
    ``PYTHON .../hadar run RUNDIR``, as a ``hadar run`` does (``hadar stop`` signals no other)."""
    script = folder / "bin" / "hadar"
    script.parent.mkdir(exist_ok=True)
    script.write_text(STAND_IN)
    return str(script)


STAND_IN = """
import signal, subprocess, sys, time
for name in sys.argv[-1].removeprefix("--ignore=").split(","):
    if name:
        signal.signal(getattr(signal, name), signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(child.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _gone(pid: int, timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while _alive(pid):
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize(
    ("ignored", "signal_name", "returncode"),
    [
        ("", "SIGINT", None),
        ("SIGINT", "SIGTERM", -signal.SIGTERM),
        ("SIGINT,SIGTERM", "SIGKILL", -signal.SIGKILL),
    ],
)
def test_stop_escalates_until_the_run_ends_and_says_which_signal_did_it(
    tmp_path: Path, ignored: str, signal_name: str, returncode: int | None
) -> None:
    rundir = tmp_path / "run"
    rundir.mkdir()
    proc = subprocess.Popen(
        [sys.executable, stand_in(tmp_path), "run", str(rundir), f"--ignore={ignored}"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        child = int(proc.stdout.readline())  # its handlers are set: the stand-in is ready
        (rundir / "detached.json").write_text(json.dumps({"pid": proc.pid}))
        # the signal the stand-in ignores is waited on for 1 s, the one that ends it for up to
        # HANG_S (a loaded machine takes its time to exit; the wait ends as soon as it has)
        ends = str(int(HANG_S))
        wait = {name: ends if name == signal_name else "1" for name in ("SIGINT", "SIGTERM")}
        res = hadar_cli(
            "stop", str(rundir), "--timeout", wait["SIGINT"], "--grace", wait["SIGTERM"],
            cwd=tmp_path, timeout=2 * HANG_S,
        )  # fmt: skip
        assert res.returncode == 0, res.stdout + res.stderr
        lost = " (the round in progress is lost)" if signal_name == "SIGKILL" else ""
        said = f"stopped by {signal_name}{lost}; continue with: hadar run --resume {rundir}"
        assert said in res.stdout, res.stdout
        rc = proc.wait(timeout=30)
        if returncode is None:
            assert rc != 0  # KeyboardInterrupt in the stand-in: SIGINT reached it
            assert "SIGTERM" not in res.stdout
        else:
            assert rc == returncode
        if signal_name == "SIGKILL":
            assert "sending SIGKILL to its process group" in res.stdout
            assert _gone(child)  # the whole group: the run's workers too
        else:
            assert _alive(child)  # a clean stop leaves the run to end its own workers
    finally:
        kill_group(proc)


def test_stop_with_timeout_0_only_asks(tmp_path: Path) -> None:
    rundir = tmp_path / "run"
    rundir.mkdir()
    proc = subprocess.Popen(
        [sys.executable, stand_in(tmp_path), "run", str(rundir), "--ignore=SIGINT"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        proc.stdout.readline()
        (rundir / "detached.json").write_text(json.dumps({"pid": proc.pid}))
        res = hadar_cli("stop", str(rundir), "--timeout", "0", cwd=tmp_path)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "(SIGINT)" in res.stdout and "SIGTERM" not in res.stdout
        assert proc.poll() is None
    finally:
        kill_group(proc)
