"""The transport of the SSH provider (what Ray calls a command runner): commands run in the
node's workdir in a process group of their own, the run's environment (``setup:``), and files
moved with SFTP and checked by sha256."""

from __future__ import annotations

import contextlib
import posixpath
import select
import shlex
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import paramiko

from hadar.core.cluster import Node
from hadar.core.errors import InputError, UnreachableNodeError
from hadar.core.integrity import SHA256_RE, sha256_file
from hadar.providers.base import CommandResult, NodeTransferError, confine
from hadar.providers.ssh.connections import ConnectionLost, SshConnections
from hadar.providers.ssh.env import ENV_NAME_RE, capture_command, captured_changes, env_prefix
from hadar.providers.transfer import part_name, receive_verified, require_sha256


class NodeSetupError(UnreachableNodeError):
    """A node's ``setup:`` commands failed: the node cannot run work in this run (exit 3)."""


class SshCommands(SshConnections):
    """Commands and files on SSH nodes, over :class:`SshConnections`."""

    _run_env: dict[str, dict[str, str]]
    _setup_locks: dict[str, threading.Lock]

    # -- paths -----------------------------------------------------------------------------
    def workdir(self, node: Node | str) -> str:
        n = self.node(node)
        name = self.dir_name(n)
        base = self._node_settings(n).remote_base or self.settings.remote_base
        if base == "~" or base.startswith("~/") or not base.startswith("/"):
            rest = base[2:] if base.startswith("~/") else ("" if base == "~" else base)
            base = posixpath.join(self._home(n), rest) if rest else self._home(n)
        return posixpath.join(posixpath.normpath(base), self.run_id, name)

    def _remote(self, node: Node, rel: str) -> str:
        return posixpath.join(self.workdir(node), confine(node.name, rel))

    def _ensure_dir(self, node: Node, sftp: paramiko.SFTPClient, path: str) -> None:
        conn = self._conn(node.name)
        if path in conn.ready_dirs:
            return
        parts = path.strip("/").split("/")
        cur = ""
        for part in parts:
            cur += "/" + part
            try:
                sftp.stat(cur)
            except FileNotFoundError:
                with contextlib.suppress(OSError):  # a concurrent caller may have created it
                    sftp.mkdir(cur)
        conn.ready_dirs.add(path)

    # -- command execution -----------------------------------------------------------------
    def _exec(
        self,
        node: Node,
        client: paramiko.SSHClient,
        command: str,
        timeout_s: float | None,
        on_timeout: Callable[[], None] | None = None,
    ) -> CommandResult:
        """Run a shell command on an open connection, collecting stdout/stderr until it exits."""
        start = time.monotonic()
        transport = client.get_transport()
        if transport is None or not transport.is_active():
            raise ConnectionLost()
        try:
            chan = transport.open_session(timeout=self.settings.connect_timeout_s)
            chan.exec_command(command)
            chan.shutdown_write()
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise ConnectionLost() from exc
        out, err = bytearray(), bytearray()
        deadline = None if timeout_s is None else start + timeout_s
        timed_out = False
        try:
            while not chan.exit_status_ready():
                if chan.recv_ready():
                    out += chan.recv(1 << 16)
                    continue
                if chan.recv_stderr_ready():
                    err += chan.recv_stderr(1 << 16)
                    continue
                if not transport.is_active():
                    raise ConnectionLost(started=True)
                if deadline is not None and time.monotonic() > deadline and not timed_out:
                    timed_out = True
                    if on_timeout is not None:
                        on_timeout()
                    deadline = time.monotonic() + self.settings.kill_grace_s + 5.0
                elif timed_out and deadline is not None and time.monotonic() > deadline:
                    break  # the kill did not make it exit: give up waiting
                select.select([chan], [], [], 0.2)
            chan.settimeout(5.0)
            with contextlib.suppress(socket.timeout, OSError, EOFError):
                while chunk := chan.recv(1 << 16):
                    out += chunk
            with contextlib.suppress(socket.timeout, OSError, EOFError):
                while chunk := chan.recv_stderr(1 << 16):
                    err += chunk
            code = chan.recv_exit_status() if chan.exit_status_ready() else -1
            if (
                code == -1
                and not timed_out
                and (not chan.eof_received or not transport.is_active())
            ):
                # closed without an exit status and without the server's EOF: the connection
                # died under the command (a command killed by a signal still gets EOF)
                raise ConnectionLost(started=True)
        finally:
            chan.close()
        return CommandResult(
            returncode=code,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            seconds=time.monotonic() - start,
            timed_out=timed_out,
        )

    def _kill_group(self, node: Node, pidfile: str) -> None:
        """TERM, then after the grace period KILL, the process group recorded in ``pidfile``."""
        g = self.settings.kill_grace_s
        pf = shlex.quote(pidfile)
        script = (
            f"i=0; while [ ! -s {pf} ] && [ $i -lt 20 ]; do sleep 0.1; i=$((i+1)); done; "
            f"[ -s {pf} ] || exit 0; p=$(cat {pf}); kill -TERM -$p 2>/dev/null; i=0; "
            f"while kill -0 -$p 2>/dev/null && [ $i -lt {int(g * 10)} ]; do sleep 0.1; i=$((i+1)); done; "
            f"kill -KILL -$p 2>/dev/null; exit 0"
        )
        with contextlib.suppress(Exception):
            self._exec(node, self._client(node), f"sh -c {shlex.quote(script)}", g + 10.0)

    def run(
        self,
        node: Node | str,
        argv: Sequence[str],
        timeout_s: float | None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        n = self.node(node)
        if not argv:
            raise InputError(f"node {n.name}: empty command")
        for key in env or {}:
            if not ENV_NAME_RE.match(key):
                raise InputError(f"node {n.name}: invalid environment variable name {key!r}")
        full_env = {**self.run_env(n), **(env or {})}
        cmd = env_prefix(full_env) + " ".join(shlex.quote(str(a)) for a in argv)
        return self._run_in_workdir(n, cmd, timeout_s, argv[0])

    def _run_in_workdir(
        self, n: Node, cmd: str, timeout_s: float | None, what: str
    ) -> CommandResult:
        """Run shell text ``cmd`` in its own process group in the workdir; on timeout (or
        Ctrl-C) the group gets TERM, then KILL."""
        wd = self.workdir(n)
        pidfile = posixpath.join(wd, ".hadar", f"pid-{uuid.uuid4().hex[:12]}")
        q = shlex.quote
        script = (
            f"mkdir -p {q(posixpath.dirname(pidfile))} && cd {q(wd)} || exit 125\n"
            f"setsid {cmd} </dev/null &\n"
            f"p=$!; echo $p > {q(pidfile)}\n"
            f"wait $p; rc=$?; rm -f {q(pidfile)}; exit $rc\n"
        )
        command = f"sh -c {q(script)}"

        def attempt(client: paramiko.SSHClient) -> CommandResult:
            try:
                return self._exec(
                    n, client, command, timeout_s, lambda: self._kill_group(n, pidfile)
                )
            except ConnectionLost as exc:
                if not exc.started:
                    raise  # the command never reached the node: safe to retry
                self._conn(n.name).drop()
                raise UnreachableNodeError(
                    f"{self._where(n)}: connection lost while running {what}"
                ) from None

        # Only the start is retried; a connection drop while the command runs is final
        # (running it twice could double a round's work).
        try:
            return self._retrying(n, f"start of {what}", attempt)
        except KeyboardInterrupt:
            self._kill_group(n, pidfile)
            raise

    # -- per-run environment ---------------------------------------------------------------
    def _environment(self, n: Node) -> tuple[list[str], bool, dict[str, str]]:
        """``(setup lines, login shell?, static env)`` of a node (node keys win)."""
        s, ns = self.settings, self._node_settings(n)
        setup = ns.setup if ns.setup is not None else (s.setup or [])
        login = ns.login_shell if ns.login_shell is not None else bool(s.login_shell)
        return list(setup), login, {**s.env, **ns.env}

    def run_env(self, node: Node | str) -> dict[str, str]:
        """The variables every command of this run gets on ``node``: what its ``setup:`` (and
        login shell, if asked) set, then ``env:``. The setup runs on first use, once per run;
        a failure raises :class:`NodeSetupError` naming the node, exit code and output."""
        n = self.node(node)
        with self._conns_lock:
            lock = self._setup_locks.setdefault(n.name, threading.Lock())
        with lock:
            if n.name in self._run_env:
                return self._run_env[n.name]
            setup, login, static = self._environment(n)
            captured: dict[str, str] = {}
            if setup or login:
                t = self.settings.setup_timeout_s
                res = self._run_in_workdir(
                    n,
                    env_prefix(static) + f"sh -c {shlex.quote(capture_command(setup, login))}",
                    t,
                    "setup",
                )
                where = self._where(n)
                if res.timed_out:
                    raise NodeSetupError(f"{where}: setup timed out after {t:g}s: {res.tail(2)}")
                changes = captured_changes(res.stdout) if res.returncode == 0 else None
                if changes is None:
                    raise NodeSetupError(
                        f"{where}: setup failed (exit {res.returncode}): "
                        f"{res.tail(2) or 'no output'}"
                    )
                captured = changes
            self._run_env[n.name] = {**captured, **static}
            return self._run_env[n.name]

    def _remote_sha256(self, node: Node, client: paramiko.SSHClient, path: str) -> str:
        py = " ".join(shlex.quote(a) for a in self.python(node))
        hasher = (
            "import hashlib,sys;h=hashlib.sha256();f=open(sys.argv[1],'rb')\n"
            "for b in iter(lambda:f.read(1<<20),b''):h.update(b)\n"
            "print(h.hexdigest())"
        )
        script = (
            'if command -v sha256sum >/dev/null 2>&1; then sha256sum -b -- "$1"; '
            f'else {py} -c {shlex.quote(hasher)} "$1"; fi'
        )
        res = self._exec(
            node,
            client,
            f"sh -c {shlex.quote(script)} sh {shlex.quote(path)}",
            self.settings.io_timeout_s,
        )
        digest = res.stdout.strip()[:64].lower()
        if res.returncode != 0 or not SHA256_RE.fullmatch(digest):
            raise NodeTransferError(
                f"{self._where(node)}: cannot hash {path}: {res.tail(1) or f'exit {res.returncode}'}"
            )
        return digest

    # -- files -----------------------------------------------------------------------------
    def sha256(self, node: Node | str, remote_rel_path: str) -> str:
        n = self.node(node)
        path = self._remote(n, remote_rel_path)
        return self._retrying(
            n, f"sha256 of {remote_rel_path}", lambda c: self._remote_sha256(n, c, path)
        )

    def put(self, node: Node | str, local_path: str | Path, remote_rel_path: str) -> str:
        n = self.node(node)
        src = Path(local_path)
        if not src.is_file():
            raise InputError(f"{src}: file not found")
        remote = self._remote(n, remote_rel_path)
        want = sha256_file(src)

        def transfer(client: paramiko.SSHClient) -> str:
            tmp = posixpath.join(posixpath.dirname(remote), part_name(posixpath.basename(remote)))
            with self._sftp(client) as sftp:
                self._ensure_dir(n, sftp, posixpath.dirname(remote))
                try:
                    sftp.put(str(src), tmp, confirm=True)
                    got = self._remote_sha256(n, client, tmp)
                    require_sha256(
                        got, want, f"{self._where(n)}: uploaded {remote_rel_path}", "local file"
                    )
                    sftp.posix_rename(tmp, remote)
                except BaseException:
                    with contextlib.suppress(Exception):
                        sftp.remove(tmp)
                    raise
            return want

        return self._retrying(n, f"put of {remote_rel_path}", transfer)

    def get(
        self,
        node: Node | str,
        remote_rel_path: str,
        local_path: str | Path,
        expected_sha256: str | None = None,
    ) -> str:
        n = self.node(node)
        remote = self._remote(n, remote_rel_path)
        dst = Path(local_path)  # its folder is created (not through a link) as it is received

        def transfer(client: paramiko.SSHClient) -> str:
            with self._sftp(client) as sftp:
                try:
                    sftp.stat(remote)
                except FileNotFoundError:
                    raise NodeTransferError(
                        f"{self._where(n)}: no file {remote_rel_path} in {self.workdir(n)}"
                    ) from None
                theirs = self._remote_sha256(n, client, remote)
                where = self._where(n)
                if expected_sha256 is not None:
                    require_sha256(
                        theirs, expected_sha256, f"{where}: {remote_rel_path}", "expected"
                    )
                receive_verified(
                    dst,
                    lambda tmp: sftp.get(remote, str(tmp)),
                    theirs,
                    f"{where}: downloaded {remote_rel_path}",
                    "node says",
                )
            return theirs

        return self._retrying(n, f"get of {remote_rel_path}", transfer)

    def remove_workdir(self, node: Node | str) -> None:
        n = self.node(node)
        wd = self.workdir(n)
        self._retrying(
            n, "workdir removal", lambda c: self._exec(n, c, f"rm -rf {shlex.quote(wd)}", 60.0)
        )
        self._conn(n.name).ready_dirs.clear()
