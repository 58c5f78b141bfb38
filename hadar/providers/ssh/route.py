"""How to reach one SSH node: host, port, user, keys, and the route there (ProxyJump hops or a
ProxyCommand), merged from the cluster file and ``~/.ssh/config`` as OpenSSH would.

Pure functions over :class:`paramiko.SSHConfig`; no connection is opened here.
"""

from __future__ import annotations

import getpass
import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import paramiko

from hadar.core.errors import InputError, shorten
from hadar.providers.ssh.hops import MAX_HOPS, check_names, parse_hops


@dataclass(frozen=True)
class Endpoint:
    """Where and as whom to connect, and through what: ``jump`` (a ProxyJump hop, itself an
    endpoint) or ``proxy_command`` (a shell command whose stdin/stdout carry the connection)."""

    host: str
    port: int
    user: str
    key_files: tuple[str, ...]
    jump: Endpoint | None = None
    proxy_command: str | None = None

    def __str__(self) -> str:
        if self.jump is not None:
            return f"{self.host}:{self.port} via {self.jump}"
        if self.proxy_command is not None:
            return f"{self.host}:{self.port} via ProxyCommand"
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class Route:
    """What the cluster file says about one node's route (``None``: not set at that level)."""

    proxy_jump: str | None = None
    proxy_command: str | None = None


class RawProxyCommandConfig(paramiko.SSHConfig):
    """``~/.ssh/config`` whose ``ProxyCommand`` comes back with its ``%`` tokens unexpanded:
    paramiko pastes ``%h``/``%r`` in unquoted; :func:`expand_tokens` quotes them."""

    def _tokenize(self, config: Any, target_hostname: str, key: str, value: str) -> str:
        # paramiko's lookup() expands every value through this hook; its type stubs omit it
        if key == "proxycommand":
            return value
        expand = paramiko.SSHConfig._tokenize  # type: ignore[attr-defined]
        return str(expand(self, config, target_hostname, key, value))

    def _does_match(self, match_list: Any, *args: Any) -> bool:
        """``Match`` blocks as paramiko matches them, except ``Match exec``: paramiko runs its
        command through a shell with ``%h`` pasted in unquoted (a ``HostName`` of
        ``a;touch x`` ran ``touch x``), before any check and with no time limit. hadar runs no
        command from ``~/.ssh/config`` but a ``ProxyCommand``: refused with one line."""
        for candidate in match_list:
            if candidate.get("type") == "exec":
                raise InputError(
                    f"~/.ssh/config: Match exec {shorten(str(candidate.get('param')))!r} is "
                    "refused: hadar runs no command from ~/.ssh/config but a ProxyCommand "
                    "(docs/security.md); remove that block, or set ssh_config to null in the "
                    "ssh section"
                )
        match = paramiko.SSHConfig._does_match  # type: ignore[attr-defined]
        return bool(match(self, match_list, *args))


def _disabled(value: str | None) -> bool:
    return value is not None and value.strip().lower() == "none"


def expand_tokens(command: str, host: str, port: int, user: str, alias: str) -> str:
    """OpenSSH's ``%h %p %r %n %%`` tokens in a ProxyCommand, each value shell-quoted (a no-op
    for the names :func:`check_names` accepts; defence in depth for any other)."""
    table = {
        "h": shlex.quote(host),
        "p": str(port),
        "r": shlex.quote(user),
        "n": shlex.quote(alias),
        "%": "%",
    }
    return re.sub(r"%(.)", lambda m: table.get(m[1], m[0]), command)


def pick_route(levels: Sequence[tuple[str, Route]]) -> tuple[str, Route]:
    """The first level (most specific first) that sets a route; both keys at one level is an
    error naming it. ``none`` at a level switches proxying off (as in ssh_config)."""
    for where, route in levels:
        if route.proxy_jump is not None and route.proxy_command is not None:
            raise InputError(f"{where}: set proxy_jump or proxy_command, not both")
        if route.proxy_jump is not None or route.proxy_command is not None:
            return where, route
    return "", Route()


def key_file_problem(key: str) -> str | None:
    """What is wrong with the ``identity_file`` ``key`` (``~`` expanded): ``not found``, ``is not
    a regular file``, or None."""
    path = os.path.expanduser(key)
    if os.path.isfile(path):
        return None
    return "is not a regular file" if os.path.lexists(path) else "not found"


def resolve(
    alias: str,
    *,
    config: paramiko.SSHConfig | None,
    port: int | None = None,
    user: str | None = None,
    explicit_key: str | None = None,
    route: Route = Route(),
    route_where: str = "",
    where: str = "",
    fallback_key: str | None = None,
    depth: int = 0,
) -> Endpoint:
    """Merge one host's settings: explicit values win over ``~/.ssh/config`` (``HostName``,
    ``Port``, ``User``, ``IdentityFile``, ``ProxyJump``, ``ProxyCommand``), then defaults.

    ``explicit_key`` must exist (one-line InputError otherwise); ``fallback_key`` is offered when
    ssh_config names no key for the host (used for jump hosts: the cluster's key)."""
    if depth > MAX_HOPS:
        raise InputError(f"host {alias}: ProxyJump chain longer than {MAX_HOPS} hops (a loop?)")
    cfg: dict[str, Any] = dict(config.lookup(alias)) if config else {}
    host = str(cfg.get("hostname") or alias)
    the_port = _port(port or cfg.get("port", 22), where or f"host {alias}")
    the_user = str(user or cfg.get("user") or getpass.getuser())
    check_names(host, the_user, f"{where or 'host ' + alias} (after ~/.ssh/config)")
    if explicit_key:
        path = os.path.expanduser(explicit_key)
        missing = key_file_problem(explicit_key)
        if missing is not None:
            raise InputError(
                f"{where or 'host ' + alias} ({host}:{the_port}): identity_file {explicit_key} {missing}"
            )
        keys: tuple[str, ...] = (path,)
    else:
        found = (os.path.expanduser(p) for p in cfg.get("identityfile", []))
        keys = tuple(p for p in found if os.path.isfile(p))
        if not keys and fallback_key and os.path.isfile(os.path.expanduser(fallback_key)):
            keys = (os.path.expanduser(fallback_key),)
    if route.proxy_jump is None and route.proxy_command is None:
        route, route_where = (
            Route(cfg.get("proxyjump"), cfg.get("proxycommand")),
            f"ssh_config Host {alias}",
        )
    if _disabled(route.proxy_jump) or _disabled(route.proxy_command):
        route = Route()
    jump: Endpoint | None = None
    proxy_command: str | None = None
    if route.proxy_command is not None:
        proxy_command = expand_tokens(route.proxy_command, host, the_port, the_user, alias)
    elif route.proxy_jump is not None:
        for hop_user, hop_host, hop_port in parse_hops(route.proxy_jump, route_where or alias):
            hop = resolve(
                hop_host,
                config=config,
                port=hop_port,
                user=hop_user,
                fallback_key=fallback_key or explicit_key,
                depth=depth + 1,
                # later hops go through the previous one (OpenSSH's order)
                route=Route() if jump is None else Route(proxy_jump="none"),
            )
            jump = hop if jump is None else _through(hop, jump)
    return Endpoint(host, the_port, the_user, keys, jump=jump, proxy_command=proxy_command)


def _port(value: object, where: str) -> int:
    """A TCP port from the cluster file or ``~/.ssh/config`` (``Port abc`` was a traceback)."""
    try:
        port = int(str(value))
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise InputError(
            f"{where} (after ~/.ssh/config): Port {shorten(str(value))!r} is not a TCP port "
            "(1-65535)"
        )
    return port


def _through(hop: Endpoint, first: Endpoint) -> Endpoint:
    return Endpoint(hop.host, hop.port, hop.user, hop.key_files, jump=first)
