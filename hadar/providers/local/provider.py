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
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from hadar.core.cluster import Cluster, Node
from hadar.core.integrity import sha256_file
from hadar.core.safe_paths import PathEscapeError, confined, remove_tree
from hadar.providers import health
from hadar.providers.base import (
    PROBE_TIMEOUT_S,
    CommandResult,
    NodeHealth,
    NodeProvider,
    NodeTransferError,
    confine,
    load_section,
)
from hadar.providers.local import LocalSettings
from hadar.providers.transfer import receive_verified, require_sha256

DEFAULT_BASE_DIR = "~/.hadar/local-nodes"
PROBE_TTL_S = 30.0
PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])
"""The directory holding the ``nodes`` package: added to PYTHONPATH so ``-m nodes.worker``
works from a node's working directory even without an installed package."""


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


def copy_verified(src: Path, dst: Path, node: str, expected: str | None = None) -> str:
    """Copy ``src`` to ``dst`` atomically (temp file + rename), hashing both ends."""
    want = sha256_file(src)
    if expected is not None:
        require_sha256(want, expected, f"node {node}: {src}", "expected")
    dst.parent.mkdir(parents=True, exist_ok=True)
    receive_verified(
        dst, lambda tmp: shutil.copyfile(src, tmp), want, f"node {node}: copy of {src}", "source"
    )
    return want


class LocalProvider(NodeProvider):
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

    def _workdir(self, node: Node | str) -> Path:
        wd = Path(self.workdir(node))
        wd.mkdir(parents=True, exist_ok=True)
        return wd

    def _file(self, node: Node, rel: str) -> Path:
        """``rel`` inside the node's working directory, refused if it (or a symlink on the way)
        leads outside it."""
        return confined(
            self._workdir(node), confine(node.name, rel), what=f"node {node.name}: file"
        )

    def python(self, node: Node | str) -> list[str]:
        self.node(node)
        return list(self._python)

    def rendezvous_address(self, node: Node | str) -> str:
        self.node(node)
        return self.settings.rendezvous_address

    def _env(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        env = dict(os.environ)
        paths = [PACKAGE_ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        env.update(extra or {})
        return env

    def put(self, node: Node | str, local_path: str | Path, remote_rel_path: str) -> str:
        n = self.node(node)
        return copy_verified(Path(local_path), self._file(n, remote_rel_path), n.name)

    def get(
        self,
        node: Node | str,
        remote_rel_path: str,
        local_path: str | Path,
        expected_sha256: str | None = None,
    ) -> str:
        n = self.node(node)
        src = self._file(n, remote_rel_path)
        if not src.is_file():
            raise NodeTransferError(
                f"node {n.name}: no file {remote_rel_path} in {self.workdir(n)}"
            )
        return copy_verified(src, Path(local_path), n.name, expected_sha256)

    def sha256(self, node: Node | str, remote_rel_path: str) -> str:
        n = self.node(node)
        return sha256_file(self._file(n, remote_rel_path))

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
