"""The ``local`` provider: nodes are worker processes on this machine, emulating their declared
GPUs unless ``emulate: false``. Registered here; the provider is
:mod:`hadar.providers.local.provider`."""

from __future__ import annotations

from hadar.providers.registry import NoTransport, ProviderKind, register_provider

KIND = register_provider(
    ProviderKind(
        "local",
        "hadar.providers.local.provider:LocalProvider",
        NoTransport,
        emulates_gpus=True,
        shares_machine=True,
        rank=0,
    )
)
