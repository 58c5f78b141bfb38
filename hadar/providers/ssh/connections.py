"""SSH connections (paramiko): one per node and per jump host, opened with bounded retries,
re-opened when they die, with one-line errors naming the node and the cause."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import paramiko
import tenacity

from hadar.core.cluster import Node
from hadar.core.errors import HadarError, UnreachableNodeError
from hadar.providers.base import NodeTransferError
from hadar.providers.ssh.config import SshConfig
from hadar.providers.ssh.hostkeys import (
    HostKeyPolicy,
    UnknownHostKey,
    UnreadableKnownHosts,
    fingerprint,
    load_known_hosts,
)
from hadar.providers.ssh.route import Endpoint

T = TypeVar("T")

PROXY_GRACE_S = 2.0
"""How long a closed ProxyCommand may take to end after SIGTERM before SIGKILL."""
# Failures reach the caller as one-line errors; keep paramiko's transport-thread tracebacks off
# stderr unless the application configures logging itself.
logging.getLogger("paramiko").addHandler(logging.NullHandler())


class ProxyProcess(paramiko.ProxyCommand):
    """paramiko's ProxyCommand, run through ``sh`` in a session of its own, whose closing ends
    that whole process group: paramiko signalled the shell alone, so the command it started
    (a relay, an ``nc``) outlived the connection and the run."""

    def __init__(self, command: str) -> None:  # noqa: D107 - the class says it
        self.cmd = ["sh", "-c", command]
        self.process = subprocess.Popen(
            self.cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
            start_new_session=True,
        )
        self.timeout = None

    def close(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, sig)
            try:
                self.process.wait(timeout=PROXY_GRACE_S)
                return
            except subprocess.TimeoutExpired:
                continue


class ConnectionLost(Exception):
    """The transport died during an operation; ``started`` if a command had already started."""

    def __init__(self, started: bool = False) -> None:
        super().__init__("connection lost")
        self.started = started


class JumpFailed(Exception):
    """Connecting to a ProxyJump hop failed (``cause`` says why)."""

    def __init__(self, hop: Endpoint, cause: BaseException) -> None:
        super().__init__(str(hop))
        self.hop = hop
        self.cause = cause


class Retry(Exception):
    """An idempotent operation lost its connection (``reason``); tenacity runs it again."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NodeSetupError(UnreachableNodeError):
    """A node's ``setup:`` commands failed: the node cannot run work in this run (exit 3)."""


# Exceptions that mean the connection (or the channel under an operation) went away, even if
# the transport has not noticed yet.
LOST_TYPES = (
    ConnectionLost,
    EOFError,
    paramiko.SSHException,
    ConnectionError,
    TimeoutError,
    socket.timeout,
)


def transient_reason(exc: BaseException, timeout_s: float) -> str | None:
    """A short reason if ``exc`` is a transient network failure worth retrying, else None."""
    if isinstance(exc, JumpFailed):
        reason = transient_reason(exc.cause, timeout_s)
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
    if isinstance(exc, EOFError | ConnectionLost):
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


def silent_server(exc: BaseException, elapsed_s: float, timeout_s: float) -> bool:
    """Whether a failed connect was a server that accepted TCP but never completed the SSH
    handshake in time (paramiko then reports the banner or session state, not a timeout)."""
    return (
        isinstance(exc, paramiko.SSHException)
        and not isinstance(exc, paramiko.AuthenticationException | paramiko.BadHostKeyException)
        and elapsed_s >= 0.9 * timeout_s
    )


class Conn:
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


class SshConnections(SshConfig):
    """The connection pool of :class:`hadar.providers.ssh.provider.SshProvider`."""

    _conns: dict[str, Conn]
    _jumps: dict[Endpoint, Conn]
    _conns_lock: threading.Lock

    # -- connections -----------------------------------------------------------------------
    def _conn(self, name: str) -> Conn:
        with self._conns_lock:
            return self._conns.setdefault(name, Conn())

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
            return ProxyProcess(ep.proxy_command)
        if ep.jump is None:
            return None
        try:
            transport = self._jump_client(ep.jump).get_transport()
        except JumpFailed:
            raise
        except Exception as exc:
            raise JumpFailed(ep.jump, exc) from None
        if transport is None:
            raise JumpFailed(ep.jump, ConnectionLost())
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
            raise JumpFailed(ep.jump, ConnectionLost()) from None

    def _jump_client(self, hop: Endpoint) -> paramiko.SSHClient:
        """A live connection to a ProxyJump hop, shared by every node behind it."""
        with self._conns_lock:
            conn = self._jumps.setdefault(hop, Conn())
        with conn.lock:
            if not conn.alive():
                conn.drop()
                try:
                    conn.client = self._connect_once(hop)
                except JumpFailed:
                    raise
                except Exception as exc:
                    raise JumpFailed(hop, exc) from None
            assert conn.client is not None
            return conn.client

    def _connect_once(self, ep: Endpoint) -> paramiko.SSHClient:
        s = self.settings
        sock = self._sock(ep)
        client = paramiko.SSHClient()
        try:
            load_known_hosts(client, self.known_hosts)
        except UnreadableKnownHosts:
            if sock is not None:
                with contextlib.suppress(Exception):
                    sock.close()
            raise
        client.set_missing_host_key_policy(HostKeyPolicy(self.known_hosts, s.trust_new_hosts))
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
            if silent_server(exc, time.monotonic() - start, s.connect_timeout_s):
                raise TimeoutError("no SSH handshake within the connect timeout") from exc
            raise
        transport = client.get_transport()
        if transport is not None and s.keepalive_s:
            transport.set_keepalive(s.keepalive_s)
        return client

    def _fatal(self, node: Node, ep: Endpoint, exc: BaseException) -> UnreachableNodeError:
        where = self._where(node, ep)
        if isinstance(exc, JumpFailed):
            hop_error = self._fatal(node, exc.hop, exc.cause)
            detail = str(hop_error).removeprefix(f"{self._where(node, exc.hop)}: ")
            return UnreachableNodeError(f"{where}: jump host {exc.hop}: {detail}")
        if isinstance(exc, UnreadableKnownHosts):
            return UnreachableNodeError(f"{where}: {exc}")
        if isinstance(exc, UnknownHostKey):
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
                lambda e: transient_reason(e, s.connect_timeout_s) is not None
            )
            try:
                client = self._retry_policy(transient)(self._connect_once, ep)
            except Exception as exc:
                reason = transient_reason(exc, s.connect_timeout_s)
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
                if alive and not isinstance(exc, LOST_TYPES):
                    if isinstance(exc, OSError):  # e.g. SFTP permission denied, disk full
                        raise NodeTransferError(
                            f"{self._where(node)}: {what} failed: {exc}"
                        ) from None
                    raise
                self._conn(node.name).drop()
                lost.append(transient_reason(exc, s.io_timeout_s) or type(exc).__name__)
                raise Retry(lost[-1]) from exc

        try:
            return self._retry_policy(tenacity.retry_if_exception_type(Retry))(once)
        except Retry as exc:
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
