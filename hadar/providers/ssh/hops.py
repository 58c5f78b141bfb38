"""ProxyJump hops and SSH names as OpenSSH reads them: pure text, no paramiko, so the cluster
file's ``ssh:`` section is checked where it is loaded (``hadar/providers/ssh/__init__.py``) with
the same rules the connection uses (``hadar/providers/ssh/route.py``)."""

from __future__ import annotations

import re

from hadar.core.errors import InputError
from hadar.providers.ssh.names import ssh_name_problem

MAX_HOPS = 8
_HOP_RE = re.compile(r"^(?:(?P<user>[^@\s]+)@)?(?P<host>\[[^\]]+\]|[^:@\s]+)(?::(?P<port>\d+))?$")


def check_names(host: str, user: str | None, where: str) -> None:
    """One-line InputError naming ``where`` if ``host`` or ``user`` is no name OpenSSH accepts
    (shell metacharacters, spaces, a leading '-')."""
    for value, what in ((host, "host"), (user, "user")):
        problem = None if value is None else ssh_name_problem(value, what)
        if problem is not None:
            raise InputError(f"{where}: {problem} (OpenSSH refuses it)")


def parse_hops(spec: str, where: str) -> list[tuple[str | None, str, int | None]]:
    """``[user@]host[:port][,...]`` (OpenSSH ProxyJump syntax) -> ``[(user, host, port)]``."""
    hops: list[tuple[str | None, str, int | None]] = []
    for raw in spec.split(","):
        text = raw.strip().removeprefix("ssh://")
        m = _HOP_RE.match(text)
        port = int(m["port"]) if m and m["port"] else None
        if not m or (port is not None and not 1 <= port <= 65535):
            raise InputError(
                f"{where}: bad ProxyJump hop {raw.strip()!r} (want [user@]host[:port])"
            )
        check_names(m["host"].strip("[]"), m["user"], f"{where}: ProxyJump hop {raw.strip()!r}")
        hops.append((m["user"], m["host"].strip("[]"), port))
    if len(hops) > MAX_HOPS:
        raise InputError(f"{where}: more than {MAX_HOPS} ProxyJump hops")
    return hops
