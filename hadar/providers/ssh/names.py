"""What OpenSSH accepts as a host or user name (ssh.c ``valid_hostname``/``valid_ruser``)."""

from __future__ import annotations

_SHELL_METACHARACTERS = frozenset("'`\"$\\;&<>|(){}")
"""What OpenSSH refuses in a host or user name (ssh.c ``valid_hostname``/``valid_ruser``): they
reach a local shell through ProxyCommand's ``%h``/``%r``."""


def ssh_name_problem(value: str, what: str) -> str | None:
    """Why ``value`` is no valid SSH host name (``what="host"``; a comma is refused too) or user
    name (``what="user"``), as OpenSSH judges it; None if it is valid."""
    bad = _SHELL_METACHARACTERS | ({","} if what == "host" else set())
    if not value:
        return f"empty {what} name"
    if value.startswith("-"):
        return f"{what} name {value!r} starts with '-'"
    if any(c in bad or c.isspace() or not c.isprintable() for c in value):
        return f"{what} name {value!r} holds a space, a control character or one of {''.join(sorted(bad))}"
    return None
