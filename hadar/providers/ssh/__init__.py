"""The ``ssh`` provider: nodes are machines reached over SSH (paramiko, the ``[ssh]`` extra).

This module registers the provider and declares its node entries' keys and its ``ssh:``
section (light: no paramiko);
the provider itself is :mod:`hadar.providers.ssh.provider`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from hadar.core.errors import InputError
from hadar.core.validation import DAY_S
from hadar.providers.command_setting import PythonCommand
from hadar.providers.registry import ProviderKind, register_provider
from hadar.providers.ssh.env import ENV_NAME_RE
from hadar.providers.ssh.hops import parse_hops
from hadar.providers.ssh.names import ssh_name_problem


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

    @field_validator("proxy_jump")
    @classmethod
    def _hops(cls, v: str | None) -> str | None:
        """Every hop checked where the file is loaded (exit 2, nothing written), as the
        connection would check it (a bad hop was found only when a run connected: exit 3)."""
        if v is not None and v.strip().lower() != "none":
            try:
                parse_hops(v, "ProxyJump")
            except InputError as exc:
                raise ValueError(str(exc)) from None
        return v

    @model_validator(mode="after")
    def _one_route(self) -> _NodeEnvironment:
        if self.proxy_jump is not None and self.proxy_command is not None:
            raise ValueError("set proxy_jump or proxy_command, not both")
        return self


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
