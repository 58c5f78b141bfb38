"""The ``local`` provider: nodes are worker processes on this machine, emulating their declared
GPUs unless ``emulate: false``. Registered here with its ``local:`` section; the provider is
:mod:`hadar.providers.local.provider`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from hadar.providers.command_setting import PythonCommand
from hadar.providers.registry import NoTransport, ProviderKind, register_provider


class LocalSettings(BaseModel):
    """The ``local:`` section of a cluster file."""

    model_config = ConfigDict(extra="forbid")

    base_dir: str | None = None
    python: PythonCommand | None = None
    rendezvous_address: str = "127.0.0.1"
    kill_grace_s: float = Field(default=3.0, ge=0.0)


KIND = register_provider(
    ProviderKind(
        "local",
        "hadar.providers.local.provider:LocalProvider",
        NoTransport,
        LocalSettings,
        emulates_gpus=True,
        shares_machine=True,
        rank=0,
    )
)
