"""``nodes.warm stop`` ends the directory's warm server for good, also one still importing torch
(whose client the coordinator killed at a round's deadline), and a client never starts a second
server while one is starting (issue 28 item 6: two servers of one node outlived an exit-4 run;
under load, the spawner killed before the server wrote its pid file let a second start), and a
server that SIGTERM does not end is killed and leaves no socket or pid file. Real processes, real
signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nodes import warm
from tests.fixtures.processes import HANG_S
from tests.nodes.helpers import REPO, stop_warm_server


def serve_pids(directory: Path) -> list[int]:
    """Warm servers whose working directory is ``directory``."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{p}/cmdline").read_bytes()
            cwd = os.readlink(f"/proc/{p}/cwd")
            state = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if b"nodes.warm\0serve" in cmd and cwd == str(directory) and state != "Z":
            out.append(int(p))
    return out


def client(directory: Path, stand_in: Path | None = None) -> subprocess.Popen[bytes]:
    """A warm client (as the coordinator starts one each round); its request is not a valid
    worker invocation, which does not matter here. ``stand_in``: a folder put first on the
    path of the client and of the server it starts (:func:`torch_that_imports_until_released`)."""
    path = [*([str(stand_in)] if stand_in else []), str(REPO), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    return subprocess.Popen(
        [sys.executable, "-m", "nodes.warm", "run", "--", "--help"],
        cwd=directory,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def torch_that_imports_until_released(folder: Path) -> Path:
    """A stand-in ``torch`` in ``folder`` whose import says it has begun (``folder/importing``)
    and lasts until ``folder/hold`` is removed: a server importing it is still starting for
    as long as the test needs, on a machine of any speed. Returns ``folder/hold``."""
    (folder / "torch").mkdir(parents=True)
    hold = folder / "hold"
    hold.touch()
    (folder / "torch" / "__init__.py").write_text(
        "import pathlib, time\n"
        f"here = pathlib.Path({str(folder)!r})\n"
        "(here / 'importing').touch()\n"
        "while (here / 'hold').exists():\n"
        "    time.sleep(0.02)\n"
        "raise ImportError('the stand-in torch was released')\n"
    )
    return hold


def lock_holders(path: Path) -> set[int]:
    """Processes holding a ``flock`` on ``path`` (``/proc/locks``)."""
    if not path.exists():
        return set()
    inode = os.stat(path).st_ino
    holders = set()
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields:  # a waiter, not a holder
            continue
        if len(fields) >= 6 and fields[1] == "FLOCK" and int(fields[5].split(":")[2]) == inode:
            holders.add(int(fields[4]))
    return holders


def wait(predicate, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_stop_ends_a_server_still_starting_and_no_second_one_starts(tmp_path: Path) -> None:
    node = tmp_path / "node"
    node.mkdir()
    stand_in = tmp_path / "stand-in"
    hold = torch_that_imports_until_released(stand_in)
    first = client(node, stand_in)
    try:
        wait(lambda: serve_pids(node), HANG_S, "the warm server to start")
        (server,) = serve_pids(node)
        # its pid file names it from the start (its spawner wrote it before the server ran)
        assert (node / ".hadar-warm.pid").read_text() == f"{server}\n"
        wait(lambda: (stand_in / "importing").exists(), HANG_S, "the server to import torch")
        os.kill(first.pid, signal.SIGKILL)  # the round's deadline killed the client
        first.wait()
        second = client(node, stand_in)  # the next round, while the first server still starts
        lock = node / ".hadar-warm.lock"
        wait(lambda: second.pid in lock_holders(lock), HANG_S, "the second client's spawn lock")
        time.sleep(1.0)  # (a second server would start at once: the lock is taken to start one)
        assert serve_pids(node) == [server]  # it waits for that server, starts no other
        assert second.poll() is None and hold.exists()  # waiting; the server is still starting
        os.kill(second.pid, signal.SIGKILL)  # that round's deadline too
        second.wait()
        stop_warm_server(node)  # the coordinator's shutdown
        assert serve_pids(node) == []  # stop returns once the server is gone
        hold.unlink()  # (before the fix the server finished importing torch and served on)
        time.sleep(0.5)
        assert serve_pids(node) == [] and not (node / ".hadar-warm.sock").exists()
    finally:
        for pid in serve_pids(node):
            os.kill(pid, signal.SIGKILL)


# A server that binds its socket after ``stop`` unlinked it and does not end on SIGTERM (one
# finishing an import under load): ``stop`` kills it and the workers it forked, and removes what it
# left.
STUBBORN_SERVER = """
import os, signal, socket, sys, time
def publish(name, pid):  # whole or not at all: the test reads it as soon as it exists
    open(name + ".part", "w").write(f"{pid}\\n")
    os.replace(name + ".part", name)
if os.fork() == 0:  # a worker it forked, in its own session (nodes.warm._fork)
    os.setsid()
    publish("worker.pid", os.getpid())
    while True:
        time.sleep(0.05)
def bind(*_):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(".hadar-warm.sock")
    globals()["kept"] = s
signal.signal(signal.SIGTERM, bind)
publish(".hadar-warm.pid", os.getpid())
while True:
    time.sleep(0.05)
"""


def test_stop_kills_a_server_ignoring_sigterm_and_removes_its_socket_and_pid_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = subprocess.Popen(
        [sys.executable, "-c", STUBBORN_SERVER, "nodes.warm", "serve"], cwd=tmp_path
    )
    try:
        wait(lambda: (tmp_path / ".hadar-warm.pid").exists(), HANG_S, "the stub to start")
        wait(lambda: (tmp_path / "worker.pid").exists(), HANG_S, "its worker to start")
        worker = int((tmp_path / "worker.pid").read_text())
        monkeypatch.setattr(warm, "STOP_GRACE_S", 0.5)
        warm.stop(tmp_path)
        # SIGTERM did not end it: SIGKILL did. (wait, not poll: ``stop`` sees the server gone once
        # its exit has begun, a moment before its parent, this test, can reap it)
        assert server.wait(timeout=HANG_S) == -signal.SIGKILL
        assert not (tmp_path / ".hadar-warm.sock").exists()
        assert not (tmp_path / ".hadar-warm.pid").exists()
        wait(
            lambda: not warm._is_warm_server(worker), HANG_S, "its worker to end"
        )  # the server could not end it
    finally:
        for pid in serve_pids(tmp_path):
            os.kill(pid, signal.SIGKILL)
        server.kill()
        server.wait()


def test_a_warm_file_the_client_cannot_write_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / ".hadar-warm.lock").mkdir()  # (root writes any file: a directory stops it)
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(
        [sys.executable, "-m", "nodes.warm", "run", "--", "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("hadar-warm: cannot start the warm server in "), done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1
    assert serve_pids(tmp_path) == []
