"""The suite leaves no process behind: a command that times out is ended with its whole process
group (pool workers, training workers), and a process that left the group (a detached run, a
warm node server: a session of its own) is ended when the test whose folder it works in or
names ends. Real processes, real timeouts."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures.processes import end_processes_under, processes_under, run_group

PARENT_OF_ONE = """
import subprocess, sys, time
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


def _ended(pid: int, timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while _alive(pid):
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def test_a_command_that_times_out_is_ended_with_its_children() -> None:
    with pytest.raises(subprocess.TimeoutExpired) as exc:
        run_group([sys.executable, "-c", PARENT_OF_ONE], timeout=3)
    out = exc.value.stdout
    text = out.decode() if isinstance(out, bytes) else out or ""
    child = int(text.split()[0])  # what it printed before the timeout is kept
    assert _ended(child)


def test_a_command_that_ends_takes_what_it_left_in_its_group() -> None:
    code = (
        "import subprocess, sys\n"
        "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "print(c.pid)\n"
    )
    res = run_group([sys.executable, "-c", code], timeout=60)
    assert res.returncode == 0, res.stderr
    assert _ended(int(res.stdout))


def test_processes_in_their_own_session_under_a_folder_are_found_and_ended(
    tmp_path: Path,
) -> None:
    """As a ``--detach``ed run: its own session, its working directory under the test's
    folder; another names the folder only on its command line."""
    inside = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"],
        cwd=tmp_path,
        start_new_session=True,
    )
    named = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)", str(tmp_path / "run")],
        start_new_session=True,
    )
    other = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)", f"{tmp_path}x"],
        start_new_session=True,
    )
    try:
        assert sorted(processes_under(tmp_path)) == sorted([inside.pid, named.pid])
        assert sorted(end_processes_under(tmp_path)) == sorted([inside.pid, named.pid])
        assert inside.wait(timeout=30) == -9 and named.wait(timeout=30) == -9
        assert other.poll() is None  # a folder whose name only starts the same is no match
    finally:
        for proc in (inside, named, other):
            proc.kill()
            proc.wait()
