"""Local provider: every node is a set of processes on this machine (the zero-set-up default).

Each node gets its own working directory ``<base_dir>/<run-id>/<node>`` (default base
``~/.hadar/local-nodes``); a node's ``speed_factor`` (from the cluster file) is what the caller
passes to the worker to emulate a slower GPU. Cluster-file section (all optional)::

    local:
      base_dir: ~/.hadar/local-nodes   # where node working directories live
      python: /path/to/python          # interpreter for the worker (default: this one)
      rendezvous_address: 127.0.0.1    # torch.distributed address of every local node
      kill_grace_s: 3                  # SIGTERM -> SIGKILL grace on timeout
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from hadar.core.cluster import Cluster, Node
from hadar.core.safe_paths import PathEscapeError, confined, remove_tree
from hadar.providers import health
from hadar.providers.base import (
    PROBE_TIMEOUT_S,
    CommandResult,
    NodeHealth,
    load_section,
)
from hadar.providers.local import LocalSettings
from hadar.providers.transfer import FolderFiles

DEFAULT_BASE_DIR = "~/.hadar/local-nodes"
PROBE_TTL_S = 30.0


def run_process(
    argv: Sequence[str],
    cwd: str | Path | None,
    timeout_s: float | None,
    env: Mapping[str, str] | None,
    kill_grace_s: float = 3.0,
) -> CommandResult:
    """Run ``argv`` in its own session; on timeout SIGTERM then SIGKILL its process group."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except (FileNotFoundError, PermissionError) as exc:
        msg = f"{argv[0] if argv else '<empty argv>'}: {exc.strerror or exc}"
        return CommandResult(127, "", msg, time.monotonic() - start)
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _killpg(proc.pid, signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=kill_grace_s)
        except subprocess.TimeoutExpired:
            _killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
    finally:
        if proc.poll() is None:  # e.g. KeyboardInterrupt while waiting
            _killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return CommandResult(
        returncode=proc.returncode,
        stdout=out.decode("utf-8", "replace"),
        stderr=err.decode("utf-8", "replace"),
        seconds=time.monotonic() - start,
        timed_out=timed_out,
    )


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class LocalProvider(FolderFiles):
    """Nodes are worker processes on this machine, each with its own working directory."""

    def __init__(
        self,
        cluster: Cluster,
        run_id: str,
        *,
        base_dir: str | Path | None = None,
        python: str | None = None,
        trust_new_hosts: bool | None = None,  # accepted for a uniform CLI; no host keys here
    ) -> None:
        super().__init__(cluster, run_id)
        self.settings: LocalSettings = load_section(cluster, "local", LocalSettings)
        base = base_dir or self.settings.base_dir or DEFAULT_BASE_DIR
        self.base_dir = Path(os.path.expanduser(str(base))).resolve()
        py = python or self.settings.python
        self._python = shlex.split(py) if py else [sys.executable]
        self._probe_lock = threading.Lock()
        self._probe_cache: tuple[CommandResult, float] | None = None

    def workdir(self, node: Node | str) -> str:
        name = self.dir_name(node)
        now = self.base_dir.resolve()  # resolved when the provider was made: a link planted
        if now != self.base_dir:  # since on the way (the run's nodes/ folder swapped) is refused
            raise PathEscapeError(
                f"node {name}: working directory: {self.base_dir} now leads to {now} (a symbolic "
                "link planted while the run goes); hadar does not write or delete through links"
            )
        return str(
            confined(self.base_dir, self.run_id, name, what=f"node {name}: working directory")
        )

    def rendezvous_address(self, node: Node | str) -> str:
        self.node(node)
        return self.settings.rendezvous_address

    def warm_zygote_dir(self, node: Node | str) -> str:
        """The run's folder of node directories: its nodes are processes on this machine, so
        one torch import serves them all (each node still has its own warm server)."""
        return str(Path(self.workdir(node)).parent)

    def run(
        self,
        node: Node | str,
        argv: Sequence[str],
        timeout_s: float | None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        wd = self._workdir(node)
        return run_process(argv, wd, timeout_s, self._env(env), self.settings.kill_grace_s)

    def _probe(self, timeout_s: float) -> tuple[CommandResult, float]:
        """Run the health probe once per provider and ``PROBE_TTL_S`` (all local nodes share
        this machine and interpreter; concurrent checks wait for the same probe)."""
        with self._probe_lock:
            cached = self._probe_cache
            if cached is not None and time.monotonic() - cached[1] < PROBE_TTL_S:
                return cached[0], 0.0
            start = time.monotonic()
            res = run_process(
                [*self._python, "-c", health.SNIPPET], None, timeout_s, self._env(None), 1.0
            )
            if health.parse(res.stdout) is not None:
                self._probe_cache = (res, time.monotonic())
            return res, time.monotonic() - start

    def check(self, node: Node | str, timeout_s: float = PROBE_TIMEOUT_S) -> NodeHealth:
        n = self.node(node)
        res, seconds = self._probe(timeout_s)
        return health.node_health(n.name, "localhost", res, seconds, timeout_s, self._python[0])

    def remove_workdir(self, node: Node | str) -> None:
        with contextlib.suppress(OSError):  # confined, and never through a link planted since
            remove_tree(Path(self.workdir(node)))

    def end_strays(self) -> None:
        """SIGTERM this user's warm servers and zygote (``nodes.warm serve``; each ends the
        workers it forked) whose working directory is inside this run's node folders, found by
        their processes, not through the folders: a node folder swapped for a link left them
        running after the run stopped."""
        root = self.base_dir / self.run_id
        for pid in _warm_processes_under(root):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)


def _warm_processes_under(root: Path) -> list[int]:
    """Pids of this user's ``nodes.warm serve`` processes whose working directory is ``root``
    or a folder below it (a folder renamed inside it stays below it)."""
    found = []
    me = os.getuid()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if entry.stat(follow_symlinks=False).st_uid != me:
                continue
            args = Path(entry.path, "cmdline").read_bytes().split(b"\0")
            if b"nodes.warm" not in args or b"serve" not in args:
                continue
            cwd = Path(os.readlink(Path(entry.path, "cwd")))
        except OSError:
            continue
        if cwd == root or root in cwd.parents:
            found.append(int(entry.name))
    return found
