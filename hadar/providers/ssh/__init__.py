"""The ``ssh`` provider: nodes are machines reached over SSH (paramiko, the ``[ssh]`` extra).

This module registers the provider and declares its node entries' keys (light: no paramiko);
the provider itself is :mod:`hadar.providers.ssh.provider`.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from hadar.providers.registry import ProviderKind, register_provider

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


def check_ssh_name(value: str | None, what: str) -> str | None:
    """``value`` if it is a valid SSH host/user name (or None), else ``ValueError``."""
    if value is not None and (problem := ssh_name_problem(value, what)) is not None:
        raise ValueError(problem)
    return value


SshHost = Annotated[str, AfterValidator(lambda v: check_ssh_name(v, "host"))]
"""A host name, alias or IP as OpenSSH accepts it (no shell metacharacters)."""
SshUser = Annotated[str, AfterValidator(lambda v: check_ssh_name(v, "user"))]
"""A user name as OpenSSH accepts it (no shell metacharacters)."""


class SshNode(BaseModel):
    """The keys of a node entry of a ``provider: ssh`` cluster."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    address: SshHost | None = None
    """Host name, ``~/.ssh/config`` alias or IP (default: the node's name)."""
    port: int | None = Field(default=None, ge=1, le=65535)
    user: SshUser | None = None
    identity_file: str | None = None
    instance_type: str | None = None
    """The EC2 instance type, for information (``hadar cluster up`` writes it)."""


KIND = register_provider(
    ProviderKind("ssh", "hadar.providers.ssh.provider:SshProvider", SshNode, rank=1)
)
