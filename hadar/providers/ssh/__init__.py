"""The ``ssh`` provider: nodes are machines reached over SSH (paramiko, the ``[ssh]`` extra).

This module registers the provider and declares its node entries' keys and its ``ssh:``
section (light: no paramiko);
the provider itself is :mod:`hadar.providers.ssh.provider`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from hadar.core.validation import DAY_S
from hadar.providers.command_setting import PythonCommand
from hadar.providers.registry import ProviderKind, register_provider
from hadar.providers.ssh.env import ENV_NAME_RE

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


def scalar_text(value: object, what: str) -> str:
    """A string, or a number written as one (``1`` is ``"1"``); ValueError for anything else (a
    null, a boolean, a list or a mapping became ``"None"`` or ``"[1, 2]"``) and for control
    characters."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"{what}: expected a string or a number (got {type(value).__name__})")
    text = str(value)
    if not text.isprintable():
        raise ValueError(f"{what}: holds a control character")
    return text


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
    port: int | None = Field(default=None, ge=1, le=65535, strict=True)
    user: SshUser | None = None
    identity_file: str | None = None
    instance_type: str | None = None
    """The EC2 instance type, for information (``hadar cluster up`` writes it)."""


DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"


class _NodeEnvironment(BaseModel):
    """Keys a node may set for itself or inherit from the ``ssh:`` section."""

    model_config = ConfigDict(extra="forbid")

    env: dict[str, str] = Field(default_factory=dict)
    setup: list[str] | None = None
    login_shell: bool | None = None
    proxy_jump: str | None = None
    proxy_command: str | None = None

    @field_validator("env", mode="before")
    @classmethod
    def _env_names(cls, v: Any) -> Any:
        if isinstance(v, Mapping):
            for key in v:
                if not ENV_NAME_RE.match(str(key)):
                    raise ValueError(f"invalid environment variable name {key!r}")
            return {str(k): scalar_text(val, f"{key}") for k, val in v.items()}
        return v

    @field_validator("setup", mode="before")
    @classmethod
    def _setup_lines(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v


class SshNodeSettings(_NodeEnvironment):
    """Per-node overrides under ``ssh.nodes.<node>`` (``env`` adds to the section's)."""

    python: PythonCommand | None = None
    remote_base: str | None = None
    rendezvous_address: str | None = None


class SshSettings(_NodeEnvironment):
    """The ``ssh:`` section of a cluster file."""

    user: SshUser | None = None
    port: int | None = Field(default=None, ge=1, le=65535, strict=True)
    identity_file: str | None = None
    known_hosts: str = DEFAULT_KNOWN_HOSTS
    ssh_config: str | None = "~/.ssh/config"
    trust_new_hosts: bool = False
    allow_agent: bool = True
    look_for_keys: bool = True
    connect_timeout_s: float = Field(default=10.0, gt=0, le=DAY_S, allow_inf_nan=False)
    io_timeout_s: float = Field(default=120.0, gt=0, le=DAY_S, allow_inf_nan=False)
    keepalive_s: int = Field(default=15, ge=0)
    connect_attempts: int = Field(default=3, ge=1, le=20)
    retry_backoff_s: float = Field(default=0.5, ge=0, le=DAY_S, allow_inf_nan=False)
    kill_grace_s: float = Field(default=3.0, ge=0, le=DAY_S, allow_inf_nan=False)
    setup_timeout_s: float = Field(default=1800.0, gt=0, le=DAY_S, allow_inf_nan=False)
    remote_base: str = "~/.hadar/runs"
    python: PythonCommand = "python3"
    nodes: dict[str, SshNodeSettings] = Field(default_factory=dict)


KIND = register_provider(
    ProviderKind("ssh", "hadar.providers.ssh.provider:SshProvider", SshNode, SshSettings, rank=1)
)
