"""The node providers by name: each provider registers its own :class:`ProviderKind` (its node
entries' keys, its settings section, its capabilities, where its classes live); nothing else
names it.

The registry imports every sub-package of :mod:`hadar.providers` once, on first use (each
``__init__`` calls :func:`register_provider`), then the ``hadar.providers`` entry-point group of
other installed packages. A sub-package's ``__init__`` must import no optional extra: the base
install (simulation only) validates cluster files with the kinds; the classes that need paramiko
or boto3 are named by ``"module:attribute"`` and imported when a run needs them.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from hadar.core.extras import require

ENTRY_POINT_GROUP = "hadar.providers"


class NoTransport(BaseModel):
    """No keys: the node entries (or the settings section) of a provider that takes none."""

    model_config = ConfigDict(extra="forbid", frozen=True)


Factory = str | Callable[..., Any]
"""A class, or ``"module:attribute"`` naming one (imported on first use, so the module may need
an optional extra)."""


@dataclass(frozen=True)
class ProviderKind:
    """What the harness knows about a node provider without importing its implementation: its
    node entries' keys, its settings section and its capabilities, which callers ask instead of
    comparing provider names."""

    name: str
    """The cluster file's ``provider:`` value (and its settings section: ``<name>:``)."""
    provider: Factory
    """The :class:`hadar.providers.base.NodeProvider` that runs work on the cluster's nodes
    (built with ``(cluster, run_id, **options)``)."""
    node_model: type[BaseModel] = NoTransport
    """The schema of its node entries' transport keys (pydantic, ``extra="forbid"``)."""
    settings_model: type[BaseModel] = NoTransport
    """The schema of its settings section (pydantic, ``extra="forbid"``), validated when the
    cluster file is loaded (:func:`hadar.providers.transport.check_settings`) and parsed by the
    provider with :func:`hadar.providers.transport.load_section`."""
    lifecycle: Factory | None = None
    """What launches, lists and terminates the cluster's machines: a
    :class:`hadar.providers.lifecycle.NodeLifecycle` built with ``(cluster)``, which ``hadar
    cluster up|down|status`` and ``hadar run --down-after`` use; None: the machines exist
    without us."""
    emulates_gpus: bool = False
    """Its nodes emulate their declared GPUs by default (``emulate:`` in the cluster file)."""
    shares_machine: bool = False
    """Every node is this machine: their GPUs are one pool, their work directories go under the
    run directory."""
    shared_filesystem: bool = False
    """Its nodes see this machine's files (a cluster's shared file system): their work
    directories go under the run directory and files move by copying, not over a connection."""
    warm_workers: bool = True
    """Its nodes may keep a warm worker server between rounds (a process that outlives the
    command that started it); False: every worker is a fresh process (under Slurm a process
    left behind would escape the allocation)."""
    rank: int = 100
    """Its place where messages list the providers (then by name)."""

    @property
    def section(self) -> str:
        """The cluster file's top-level section it reads its settings from (its name)."""
        return self.name

    @property
    def launches_nodes(self) -> bool:
        """It launches and terminates its machines (it has a ``lifecycle``)."""
        return self.lifecycle is not None


_REGISTERED: dict[str, ProviderKind] = {}
_discovered = False


def register_provider(kind: ProviderKind) -> ProviderKind:
    """Make ``kind`` a provider cluster files may name. A second, different kind under a taken
    name is an error (a typo would hide a provider)."""
    taken = _REGISTERED.get(kind.name)
    if taken is not None and taken != kind:
        raise ValueError(f"register_provider: provider name {kind.name!r} is taken")
    if kind.name == "simulated":
        raise ValueError("register_provider: 'simulated' is the core's (clusters with no machines)")
    _REGISTERED[kind.name] = kind
    return kind


def unregister_provider(name: str) -> None:
    """Forget provider ``name`` (tests that register a provider of their own take it out)."""
    _REGISTERED.pop(name, None)


def _discover() -> None:
    global _discovered
    if _discovered:
        return
    from importlib.metadata import entry_points

    import hadar.providers as package

    for sub in sorted(m.name for m in pkgutil.iter_modules(package.__path__) if m.ispkg):
        importlib.import_module(f"{package.__name__}.{sub}")
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        ep.load()
    _discovered = True  # only once every module imported: a failed import is raised again


def provider_kinds() -> list[ProviderKind]:
    """Every registered provider, in the order messages list them."""
    _discover()
    return sorted(_REGISTERED.values(), key=lambda k: (k.rank, k.name))


def provider_kind(provider: str) -> ProviderKind | None:
    """The kind of provider ``provider`` names; None for ``simulated`` (no machines) or an
    unknown name."""
    _discover()
    return _REGISTERED.get(provider)


def provider_names(conjunction: str = "or") -> str:
    """``local, ssh, aws or slurm``: the providers that reach machines, for messages."""
    names = [k.name for k in provider_kinds()]
    return f"{', '.join(names[:-1])} {conjunction} {names[-1]}" if len(names) > 1 else names[0]


def load_factory(factory: Factory, purpose: str) -> Callable[..., Any]:
    """The class ``factory`` names, importing its module (one line naming the extra to install
    when an optional dependency is missing)."""
    if not isinstance(factory, str):
        return factory
    module, _, attribute = factory.partition(":")
    value: Callable[..., Any] = getattr(require(module, purpose), attribute)
    return value
