"""SSH provider (paramiko): nodes are machines reached over SSH, directly or through a bastion.

Where a node's connection settings come from, first match wins:
the node entry (``address``, ``port``, ``user``, ``identity_file``), the cluster file's ``ssh:``
section, then ``~/.ssh/config`` (``Host`` aliases with ``HostName``, ``Port``, ``User``,
``IdentityFile``, ``ProxyJump``, ``ProxyCommand``). The route (ProxyJump hops or a
ProxyCommand) comes from ``ssh.nodes.<node>``, then ``ssh:``, then ``~/.ssh/config``; jump
hosts are themselves looked up in ``~/.ssh/config`` and share one connection per hop. Keys from
a running SSH agent are tried too. Host keys (of every hop) are checked strictly against
``known_hosts``: an unknown key is refused unless ``trust_new_hosts`` is set (then it is
recorded), a changed key is always refused. All remote files live in
``<remote_base>/<run-id>/<node>/``; paths that try to leave it are refused.

Environment: ``setup:`` lines run once per run on each node (first use), in one shell, in the
node's workdir (``set -e``); the variables they set (``conda activate`` ...) are kept for every
later command of the run, as are those of the user's login shell with ``login_shell: true``;
``env:`` adds fixed variables. Connection retries use tenacity (bounded exponential backoff).

``ssh:`` section keys (all optional)::

    user: ubuntu                  port: 22                 identity_file: ~/.ssh/id_ed25519
    known_hosts: ~/.ssh/known_hosts                        trust_new_hosts: false
    ssh_config: ~/.ssh/config     # null: do not read one
    proxy_jump: me@bastion.lab:22 # OpenSSH syntax, comma-separated hops; or
    proxy_command: ssh -W %h:%p bastion                    # (not both; "none": off)
    allow_agent: true             look_for_keys: true      # paramiko's ~/.ssh/id_* lookup
    connect_timeout_s: 10         io_timeout_s: 120        keepalive_s: 15
    connect_attempts: 3           retry_backoff_s: 0.5     kill_grace_s: 3
    remote_base: ~/.hadar/runs    python: python3
    env: {OMP_NUM_THREADS: "4"}   login_shell: false
    setup: [source ~/miniconda3/etc/profile.d/conda.sh, conda activate hadar]
    setup_timeout_s: 1800
    nodes:                        # per-node overrides (env adds to the section's)
      gpu1: {python: /opt/venv/bin/python, remote_base: /scratch/hadar, rendezvous_address: 10.0.0.5,
             proxy_jump: me@other-bastion, env: {CUDA_VISIBLE_DEVICES: "0"}, setup: [...]}
"""

from __future__ import annotations

import base64
import contextlib
import errno
import hashlib
import logging
import os
import posixpath
import select
import shlex
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import paramiko
import tenacity

from hadar.core.cluster import Cluster, Node
from hadar.core.errors import HadarError, InputError, UnreachableNodeError
from hadar.core.integrity import SHA256_RE, sha256_file
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
from hadar.providers.ssh import SshNode, SshNodeSettings, SshSettings
from hadar.providers.ssh.env import ENV_NAME_RE, capture_command, captured_changes, env_prefix
from hadar.providers.ssh.route import (
    Endpoint,
    RawProxyCommandConfig,
    Route,
    key_file_problem,
    pick_route,
    resolve,
)
from hadar.providers.transfer import part_name, receive_verified, require_sha256
from hadar.providers.transport import node_transport

T = TypeVar("T")
# Failures reach the caller as one-line errors; keep paramiko's transport-thread tracebacks off
# stderr unless the application configures logging itself.
logging.getLogger("paramiko").addHandler(logging.NullHandler())
_KNOWN_HOSTS_LOCK = threading.Lock()


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH-style ``SHA256:...`` fingerprint of a public key."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def known_hosts_name(host: str, port: int) -> str:
    """The name a host is filed under in known_hosts (``[host]:port`` for non-22 ports)."""
    return host if port == 22 else f"[{host}]:{port}"


def record_host_key(path: Path, host_name: str, key: paramiko.PKey) -> None:
    """Append a host key to a known_hosts file (process-wide lock; creates the file)."""
    line = paramiko.hostkeys.HostKeyEntry([host_name], key).to_line()
    if line is None:  # paramiko gives None only for an entry without a name or key
        raise ValueError(f"{host_name}: cannot write its host key to {path}")
    with _KNOWN_HOSTS_LOCK:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            f.write(line)


class _UnknownHostKey(Exception):
    def __init__(self, host_name: str, key: paramiko.PKey) -> None:
        super().__init__(host_name)
        self.key = key


class _HostKeyPolicy(paramiko.MissingHostKeyPolicy):
    """Refuse unknown host keys, or (when trusting) record them in known_hosts."""

    def __init__(self, known_hosts: Path, trust: bool) -> None:
        self.known_hosts = known_hosts
        self.trust = trust

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        if not self.trust:
            raise _UnknownHostKey(hostname, key)
        record_host_key(self.known_hosts, hostname, key)


class _ConnectionLost(Exception):
    """The transport died during an operation; ``started`` if a command had already started."""

    def __init__(self, started: bool = False) -> None:
        super().__init__("connection lost")
        self.started = started


class _JumpFailed(Exception):
    """Connecting to a ProxyJump hop failed (``cause`` says why)."""

    def __init__(self, hop: Endpoint, cause: BaseException) -> None:
        super().__init__(str(hop))
        self.hop = hop
        self.cause = cause


class _Retry(Exception):
    """An idempotent operation lost its connection (``reason``); tenacity runs it again."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NodeSetupError(UnreachableNodeError):
    """A node's ``setup:`` commands failed: the node cannot run work in this run (exit 3)."""


# Exceptions that mean the connection (or the channel under an operation) went away, even if
# the transport has not noticed yet.
_LOST_TYPES = (
    _ConnectionLost,
    EOFError,
    paramiko.SSHException,
    ConnectionError,
    TimeoutError,
    socket.timeout,
)


def _transient_reason(exc: BaseException, timeout_s: float) -> str | None:
    """A short reason if ``exc`` is a transient network failure worth retrying, else None."""
    if isinstance(exc, _JumpFailed):
        reason = _transient_reason(exc.cause, timeout_s)
        return f"jump host {exc.hop}: {reason}" if reason else None
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        codes = {getattr(e, "errno", None) for e in exc.errors.values()}
        if codes & {errno.ECONNREFUSED}:
            return "connection refused"
        return "could not connect"
    if isinstance(exc, paramiko.ChannelException):
        return f"the jump host could not connect: {exc.text or 'channel open failed'}"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, ConnectionResetError | BrokenPipeError | ConnectionAbortedError):
        return "connection reset"
    if isinstance(exc, TimeoutError | socket.timeout):
        return f"timed out after {timeout_s:g}s"
    if isinstance(exc, EOFError | _ConnectionLost):
        return "connection closed by the server"
    if isinstance(exc, paramiko.SSHException) and not isinstance(
        exc, paramiko.AuthenticationException | paramiko.BadHostKeyException
    ):
        text = str(exc)
        if "banner" in text or "closed" in text.lower() or "reset" in text.lower():
            return "connection closed during handshake"
    if isinstance(exc, OSError) and exc.errno in {
        errno.ECONNREFUSED,
        errno.ECONNRESET,
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
        errno.ETIMEDOUT,
    }:
        return os.strerror(exc.errno).lower()
    return None


def _silent_server(exc: BaseException, elapsed_s: float, timeout_s: float) -> bool:
    """Whether a failed connect was a server that accepted TCP but never completed the SSH
    handshake in time (paramiko then reports the banner or session state, not a timeout)."""
    return (
        isinstance(exc, paramiko.SSHException)
        and not isinstance(exc, paramiko.AuthenticationException | paramiko.BadHostKeyException)
        and elapsed_s >= 0.9 * timeout_s
    )


class _Conn:
    """One node's (or jump host's) SSH connection (one Transport), re-established when it dies."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.client: paramiko.SSHClient | None = None
        self.endpoint: Endpoint | None = None
        self.home: str | None = None
        self.ready_dirs: set[str] = set()

    def alive(self) -> bool:
        t = self.client.get_transport() if self.client else None
        return bool(t and t.is_active())

    def drop(self) -> None:
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.close()
        self.client = None
        self.ready_dirs.clear()


class SshProvider(NodeProvider):
    """Nodes reached over SSH with paramiko (see the module docstring for the settings)."""

    def __init__(
        self,
        cluster: Cluster,
        run_id: str,
        *,
        trust_new_hosts: bool | None = None,
        settings: SshSettings | None = None,
    ) -> None:
        super().__init__(cluster, run_id)
        self._trust_override = trust_new_hosts
        self._apply_settings(cluster, settings)
        self._conns: dict[str, _Conn] = {}
        self._jumps: dict[Endpoint, _Conn] = {}
        self._conns_lock = threading.Lock()
        self._run_env: dict[str, dict[str, str]] = {}
        self._setup_locks: dict[str, threading.Lock] = {}

    @classmethod
    def check_setup(cls, cluster: Cluster) -> None:
        """Every ``identity_file`` the cluster file names is a regular file (exit 2 before the
        run writes anything, not an unreachable node, exit 3, at the first probe)."""
        s = load_section(cluster, "ssh", SshSettings)
        source = cluster.source or cluster.name
        for n in cluster.nodes:
            key = node_transport(cluster, n, SshNode).identity_file or s.identity_file
            missing = None if key is None else key_file_problem(key)
            if missing is not None:
                raise InputError(f"{source}: node {n.name}: identity_file {key} {missing}")

    def _apply_settings(self, cluster: Cluster, settings: SshSettings | None = None) -> None:
        s = settings or load_section(cluster, "ssh", SshSettings)
        if self._trust_override is not None:
            s = s.model_copy(update={"trust_new_hosts": self._trust_override})
        unknown = sorted(set(s.nodes) - set(cluster.node_names))
        if unknown:
            raise InputError(
                f"{cluster.source or cluster.name}: ssh.nodes.{unknown[0]}: no such node in the cluster"
            )
        for n in cluster.nodes:  # a bad node entry fails here, not at first use
            node_transport(cluster, n, SshNode)
        self.settings = s
        self.known_hosts = Path(os.path.expanduser(s.known_hosts))
        self._ssh_config = self._load_ssh_config()

    # -- configuration ---------------------------------------------------------------------
    def _load_ssh_config(self) -> paramiko.SSHConfig | None:
        if not self.settings.ssh_config:
            return None
        path = Path(os.path.expanduser(self.settings.ssh_config))
        if not path.is_file():
            return None
        try:
            return RawProxyCommandConfig.from_path(str(path))
        except Exception as exc:  # paramiko raises ConfigParseError and friends
            raise InputError(f"{path}: cannot parse SSH config: {exc}") from None

    def endpoint(self, node: Node | str) -> Endpoint:
        """The merged connection settings of a node (node entry > ssh section > ~/.ssh/config),
        with its route: ProxyJump hops or a ProxyCommand (ssh.nodes.<node> > ssh > ssh_config)."""
        n = self.node(node)
        s = self.settings
        ns = self._node_settings(n)
        t = self.transport(n)
        source = self.cluster.source or self.cluster.name
        where, route = pick_route(
            [
                (f"{source}: ssh.nodes.{n.name}", Route(ns.proxy_jump, ns.proxy_command)),
                (f"{source}: ssh", Route(s.proxy_jump, s.proxy_command)),
            ]
        )
        return resolve(
            t.address or n.name,
            config=self._ssh_config,
            port=t.port or s.port,
            user=t.user or s.user,
            explicit_key=t.identity_file or s.identity_file,
            route=route,
            route_where=where,
            where=f"node {n.name}",
        )

    def transport(self, node: Node | str) -> SshNode:
        """The node entry's SSH keys (address, port, user, identity_file)."""
        return node_transport(self.cluster, self.node(node), SshNode)

    def _node_settings(self, node: Node) -> SshNodeSettings:
        return self.settings.nodes.get(node.name) or SshNodeSettings()

    def python(self, node: Node | str) -> list[str]:
        n = self.node(node)
        return shlex.split(self._node_settings(n).python or self.settings.python)

    def rendezvous_address(self, node: Node | str) -> str:
        n = self.node(node)
        return self._node_settings(n).rendezvous_address or self.endpoint(n).host

    def update_cluster(self, cluster: Cluster) -> None:
        """Swap in a new node list and ssh settings (cloud churn); connections of changed or
        gone nodes close (and their setup runs again on next use), the others stay open."""
        self._apply_settings(cluster)
        self.cluster = cluster
        with self._conns_lock:
            for name, conn in list(self._conns.items()):
                gone = name not in cluster.node_index
                if gone or (conn.endpoint and conn.endpoint != self.endpoint(name)):
                    conn.drop()
                    del self._conns[name]
                    self._run_env.pop(name, None)

    # -- connections -----------------------------------------------------------------------
    def _conn(self, name: str) -> _Conn:
        with self._conns_lock:
            return self._conns.setdefault(name, _Conn())

    def _where(self, node: Node, ep: Endpoint | None = None) -> str:
        return f"node {node.name} ({ep or self.endpoint(node)})"

    def _retry_policy(self, retry: tenacity.retry_base) -> tenacity.Retrying:
        """Bounded exponential backoff: ``retry_backoff_s`` x 1, 2, 4 ... (at most 8 s)."""
        s = self.settings
        return tenacity.Retrying(
            stop=tenacity.stop_after_attempt(s.connect_attempts),
            wait=tenacity.wait_exponential(multiplier=s.retry_backoff_s, min=0, max=8.0),
            retry=retry,
            reraise=True,
        )

    def _sock(self, ep: Endpoint) -> Any:
        """The socket-like object the connection to ``ep`` runs over (None: plain TCP)."""
        if ep.proxy_command is not None:
            # OpenSSH runs ProxyCommand through the shell; paramiko splits it, so hand it to sh
            return paramiko.ProxyCommand(f"sh -c {shlex.quote(ep.proxy_command)}")
        if ep.jump is None:
            return None
        try:
            transport = self._jump_client(ep.jump).get_transport()
        except _JumpFailed:
            raise
        except Exception as exc:
            raise _JumpFailed(ep.jump, exc) from None
        if transport is None:
            raise _JumpFailed(ep.jump, _ConnectionLost())
        try:
            return transport.open_channel(
                "direct-tcpip",
                (ep.host, ep.port),
                ("127.0.0.1", 0),
                timeout=self.settings.connect_timeout_s,
            )
        except paramiko.ChannelException:
            raise  # the jump host is fine; it could not reach the node
        except (paramiko.SSHException, EOFError, OSError):
            # the jump connection died under us: drop it so the retry opens a new one
            with self._conns_lock:
                dead = self._jumps.pop(ep.jump, None)
            if dead is not None:
                dead.drop()
            raise _JumpFailed(ep.jump, _ConnectionLost()) from None

    def _jump_client(self, hop: Endpoint) -> paramiko.SSHClient:
        """A live connection to a ProxyJump hop, shared by every node behind it."""
        with self._conns_lock:
            conn = self._jumps.setdefault(hop, _Conn())
        with conn.lock:
            if not conn.alive():
                conn.drop()
                try:
                    conn.client = self._connect_once(hop)
                except _JumpFailed:
                    raise
                except Exception as exc:
                    raise _JumpFailed(hop, exc) from None
            assert conn.client is not None
            return conn.client

    def _connect_once(self, ep: Endpoint) -> paramiko.SSHClient:
        s = self.settings
        sock = self._sock(ep)
        client = paramiko.SSHClient()
        if self.known_hosts.is_file():
            client.load_host_keys(str(self.known_hosts))
        client.set_missing_host_key_policy(_HostKeyPolicy(self.known_hosts, s.trust_new_hosts))
        start = time.monotonic()
        try:
            client.connect(
                ep.host,
                port=ep.port,
                username=ep.user,
                # paramiko takes "the filename, or list of filenames" (its docs);
                # types-paramiko declares only str
                key_filename=list(ep.key_files) or None,  # type: ignore[arg-type]
                timeout=s.connect_timeout_s,
                banner_timeout=s.connect_timeout_s,
                auth_timeout=s.connect_timeout_s,
                channel_timeout=s.connect_timeout_s,
                allow_agent=s.allow_agent,
                look_for_keys=s.look_for_keys,
                sock=sock,
            )
        except BaseException as exc:
            client.close()
            if sock is not None:
                with contextlib.suppress(Exception):
                    sock.close()
            if _silent_server(exc, time.monotonic() - start, s.connect_timeout_s):
                raise TimeoutError("no SSH handshake within the connect timeout") from exc
            raise
        transport = client.get_transport()
        if transport is not None and s.keepalive_s:
            transport.set_keepalive(s.keepalive_s)
        return client

    def _fatal(self, node: Node, ep: Endpoint, exc: BaseException) -> UnreachableNodeError:
        where = self._where(node, ep)
        if isinstance(exc, _JumpFailed):
            hop_error = self._fatal(node, exc.hop, exc.cause)
            detail = str(hop_error).removeprefix(f"{self._where(node, exc.hop)}: ")
            return UnreachableNodeError(f"{where}: jump host {exc.hop}: {detail}")
        if isinstance(exc, _UnknownHostKey):
            return UnreachableNodeError(
                f"{where}: unknown host key {exc.key.get_name()} {fingerprint(exc.key)} "
                f"(not in {self.known_hosts}); verify it, then add it to known_hosts or pass "
                f"--trust-new-hosts (ssh.trust_new_hosts: true)"
            )
        if isinstance(exc, paramiko.BadHostKeyException):
            return UnreachableNodeError(
                f"{where}: host key CHANGED (known_hosts has {exc.expected_key.get_name()} "
                f"{fingerprint(exc.expected_key)}, server sent {exc.key.get_name()} "
                f"{fingerprint(exc.key)}); possible man-in-the-middle: if the change is expected, "
                f"remove the old entry from {self.known_hosts}"
            )
        if isinstance(exc, paramiko.AuthenticationException):
            tried = ", ".join(ep.key_files) or "agent/default keys"
            return UnreachableNodeError(
                f"{where}: authentication failed for user {ep.user} (keys: {tried}): {exc}"
            )
        if isinstance(exc, paramiko.SSHException) and "No authentication methods" in str(exc):
            return UnreachableNodeError(
                f"{where}: authentication failed for user {ep.user}: no key to offer "
                f"(set identity_file, run an SSH agent, or enable look_for_keys)"
            )
        if isinstance(exc, socket.gaierror):
            return UnreachableNodeError(f"{where}: cannot resolve host {ep.host!r}")
        text = str(exc).strip().splitlines()
        return UnreachableNodeError(
            f"{where}: SSH error: {type(exc).__name__}: {text[0] if text else ''}"
        )

    def _client(self, node: Node) -> paramiko.SSHClient:
        """A live client for ``node``: the cached one, or a new connection with bounded retries
        (backoff on refused/reset/timeout; never on authentication or host-key errors)."""
        conn = self._conn(node.name)
        with conn.lock:
            if conn.alive():
                assert conn.client is not None
                return conn.client
            conn.drop()
            ep = self.endpoint(node)
            s = self.settings
            transient = tenacity.retry_if_exception(
                lambda e: _transient_reason(e, s.connect_timeout_s) is not None
            )
            try:
                client = self._retry_policy(transient)(self._connect_once, ep)
            except Exception as exc:
                reason = _transient_reason(exc, s.connect_timeout_s)
                if reason is None:
                    raise self._fatal(node, ep, exc) from None
                raise UnreachableNodeError(
                    f"{self._where(node, ep)}: unreachable after {s.connect_attempts} attempts: {reason}"
                ) from None
            conn.client, conn.endpoint = client, ep
            return client

    def _retrying(self, node: Node, what: str, op: Callable[[paramiko.SSHClient], T]) -> T:
        """Run an idempotent operation; if the connection dies, reconnect and run it again."""
        s = self.settings
        lost: list[str] = []

        def once() -> T:
            try:
                client = self._client(node)
            except UnreachableNodeError as exc:
                if not lost:
                    raise
                where = self._where(node)
                detail = str(exc).removeprefix(f"{where}: ")
                raise UnreachableNodeError(
                    f"{where}: connection lost during {what} ({lost[-1]}); reconnecting failed: {detail}"
                ) from None
            try:
                return op(client)
            except HadarError:
                raise
            except Exception as exc:
                transport = client.get_transport()
                alive = transport is not None and transport.is_active()
                if alive and not isinstance(exc, _LOST_TYPES):
                    if isinstance(exc, OSError):  # e.g. SFTP permission denied, disk full
                        raise NodeTransferError(
                            f"{self._where(node)}: {what} failed: {exc}"
                        ) from None
                    raise
                self._conn(node.name).drop()
                lost.append(_transient_reason(exc, s.io_timeout_s) or type(exc).__name__)
                raise _Retry(lost[-1]) from exc

        try:
            return self._retry_policy(tenacity.retry_if_exception_type(_Retry))(once)
        except _Retry as exc:
            raise UnreachableNodeError(
                f"{self._where(node)}: connection lost during {what}: {exc.reason}"
            ) from None

    @contextlib.contextmanager
    def _sftp(self, client: paramiko.SSHClient) -> Iterator[paramiko.SFTPClient]:
        sftp = client.open_sftp()
        try:
            channel = sftp.get_channel()
            if channel is not None:  # open_sftp always opens one; None only after close()
                channel.settimeout(self.settings.io_timeout_s)
            yield sftp
        finally:
            with contextlib.suppress(Exception):
                sftp.close()

    def _home(self, node: Node) -> str:
        conn = self._conn(node.name)
        if conn.home is None:

            def probe(client: paramiko.SSHClient) -> str:
                with self._sftp(client) as sftp:
                    return sftp.normalize(".")

            conn.home = self._retrying(node, "home directory lookup", probe)
        return conn.home

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
            raise _ConnectionLost()
        try:
            chan = transport.open_session(timeout=self.settings.connect_timeout_s)
            chan.exec_command(command)
            chan.shutdown_write()
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise _ConnectionLost() from exc
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
                    raise _ConnectionLost(started=True)
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
                raise _ConnectionLost(started=True)
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
            except _ConnectionLost as exc:
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
        dst = Path(local_path)
        dst.parent.mkdir(parents=True, exist_ok=True)

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

    # -- health ----------------------------------------------------------------------------
    def check(self, node: Node | str, timeout_s: float = PROBE_TIMEOUT_S) -> NodeHealth:
        n = self.node(node)
        start = time.monotonic()
        try:
            ep = self.endpoint(n)
        except InputError as exc:
            return NodeHealth(n.name, False, self.transport(n).address, error=str(exc))
        address = str(ep)
        try:
            py = self.python(n)
            cmd = env_prefix(self.run_env(n)) + " ".join(
                shlex.quote(a) for a in [*py, "-c", health.SNIPPET]
            )
            res = self._retrying(n, "health check", lambda c: self._exec(n, c, cmd, timeout_s))
        except UnreachableNodeError as exc:
            return NodeHealth(
                n.name, False, address, error=str(exc), seconds=time.monotonic() - start
            )
        seconds = time.monotonic() - start
        return health.node_health(n.name, address, res, seconds, timeout_s, py[0])

    def close(self) -> None:
        with self._conns_lock:
            for conn in [*self._conns.values(), *self._jumps.values()]:
                conn.drop()
            self._conns.clear()
            self._jumps.clear()
