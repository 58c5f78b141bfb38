"""SSH host keys: fingerprints, ``known_hosts`` names and entries, and the policy that refuses
an unknown key (or records it when new hosts are trusted)."""

from __future__ import annotations

import base64
import hashlib
import os
import stat
import threading
from pathlib import Path

import paramiko

from hadar.core.errors import InputError

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
        # O_NONBLOCK: a FIFO planted as the file is no wait for a reader that never comes
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(path, flags, 0o600)
        except OSError as exc:  # a FIFO with no reader (ENXIO), a folder, no permission
            raise InputError(
                f"known_hosts {path}: cannot record a host key: {exc.strerror or exc}"
            ) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise InputError(
                    f"known_hosts {path}: not a regular file; hadar records host keys only in one"
                )
            os.write(fd, line.encode())
        finally:
            os.close(fd)


class UnreadableKnownHosts(Exception):
    """A known_hosts file paramiko cannot read (the message names the file and line)."""


def load_known_hosts(client: paramiko.SSHClient, path: Path) -> None:
    """Load ``path``'s host keys into ``client`` (nothing if it is no regular file);
    :class:`UnreadableKnownHosts` naming the file, and the line where there is one, if a line
    holds a key paramiko cannot decode, or the file is not UTF-8 text or cannot be read."""
    if not path.is_file():
        return
    try:
        client.load_host_keys(str(path))
    except paramiko.hostkeys.InvalidHostKey as exc:
        number = _line_number(path, exc.line)
        where = f"line {number}" if number else "a line"
        raise UnreadableKnownHosts(
            f"known_hosts {path}: {where}: a host key that cannot be decoded; "
            f"remove or fix that line"
        ) from None
    except UnicodeDecodeError:
        raise UnreadableKnownHosts(f"known_hosts {path}: not UTF-8 text") from None
    except OSError as exc:
        raise UnreadableKnownHosts(
            f"known_hosts {path}: cannot read: {exc.strerror or exc}"
        ) from None


def _line_number(path: Path, line: str) -> int | None:
    """The 1-based number of the first line of ``path`` that is ``line`` (stripped)."""
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            for number, text in enumerate(f, 1):
                if text.strip() == line.strip():
                    return number
    except OSError:
        return None
    return None


class UnknownHostKey(Exception):
    def __init__(self, host_name: str, key: paramiko.PKey) -> None:
        super().__init__(host_name)
        self.key = key


class HostKeyPolicy(paramiko.MissingHostKeyPolicy):
    """Refuse unknown host keys, or (when trusting) record them in known_hosts."""

    def __init__(self, known_hosts: Path, trust: bool) -> None:
        self.known_hosts = known_hosts
        self.trust = trust

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        if not self.trust:
            raise UnknownHostKey(hostname, key)
        record_host_key(self.known_hosts, hostname, key)
