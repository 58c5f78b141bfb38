"""The machines' lifecycle, apart from running work on them (Ray's ``NodeProvider`` beside its
``CommandRunner``): launch, list and terminate the machines of a cluster whose provider
``launches_nodes``. ``hadar cluster up|down|status`` and ``hadar run --down-after`` go through
:class:`NodeLifecycle` only, so a new provider that launches machines subclasses it in its own
package and names it in its ``ProviderKind.lifecycle``; ``aws`` has ``AwsCluster``.

Imports no optional extra (the lifecycle itself is imported when a command needs it).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

from hadar.core.cluster import Cluster, Node
from hadar.core.errors import InputError
from hadar.providers.registry import load_factory, provider_kind, provider_kinds

Log = Callable[[str], None]


def _quiet(_message: str) -> None:
    """The default log: say nothing."""


class Machine(Protocol):
    """One machine a lifecycle launched for a node (an EC2 instance), as ``status`` lists it."""

    @property
    def node(self) -> str: ...
    @property
    def machine_id(self) -> str: ...
    @property
    def machine_type(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def public_ip(self) -> str | None: ...
    @property
    def private_ip(self) -> str | None: ...


@dataclass(frozen=True)
class CostLine:
    """What the machines of one type cost per hour (``usd_per_hour`` None: no price known)."""

    label: str
    count: int
    usd_per_hour: float | None

    @property
    def total(self) -> float | None:
        return None if self.usd_per_hour is None else self.usd_per_hour * self.count


@dataclass(frozen=True)
class LaunchCost:
    """What launching some machines costs per hour, with a note for each reason it may be off."""

    lines: tuple[CostLine, ...]
    notes: tuple[str, ...] = ()

    @property
    def usd_per_hour(self) -> float:
        """The known part of the hourly cost."""
        return sum(line.total or 0.0 for line in self.lines)


class NodeLifecycle(ABC):
    """Launch, list and terminate the machines of ``cluster``'s nodes (one machine per node).
    Built with ``(cluster)``; the optional steps (cost, dry run, readiness, a cluster file for
    the launched machines) default to "none"."""

    machine_word: ClassVar[str] = "machine"
    """What messages call one machine (``instance`` for EC2)."""
    cluster_file_word: ClassVar[str | None] = None
    """What :meth:`write_cluster_file` writes (``SSH cluster file``); None: nothing, the cluster
    file itself reaches the launched machines."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    @property
    def machines_word(self) -> str:
        return f"{self.machine_word}s"

    def scope(self) -> str:
        """Which machines are the cluster's, for messages (``instances tagged ...``)."""
        return f"{self.machines_word} of cluster {self.cluster.name}"

    @abstractmethod
    def machines(self, everything: bool = False) -> Sequence[Machine]:
        """The cluster's live machines in node order (``everything``: terminated ones too)."""

    @abstractmethod
    def to_launch(self) -> tuple[list[Node], Mapping[str, Machine]]:
        """The nodes that have no machine (what :meth:`up` would launch), and the machines the
        others already have (node -> machine)."""

    @abstractmethod
    def up(self, *, wait_ssh: bool = True, log: Log = _quiet) -> Sequence[Machine]:
        """Launch a machine for every node that has none (idempotent) and wait until they run
        (and, with ``wait_ssh``, are ready); returns every node's machine in node order."""

    @abstractmethod
    def running_nodes(self) -> Mapping[str, Machine]:
        """Node name -> its running machine."""

    @abstractmethod
    def down(self, log: Log = _quiet, wait: bool = True) -> list[str]:
        """Terminate every machine of the cluster (none: nothing to do); returns their ids."""

    def cost(self, nodes: Sequence[Node]) -> LaunchCost | None:
        """What launching a machine for each of ``nodes`` costs per hour; None: free or unknown."""
        return None

    def dry_run(self, nodes: Sequence[Node]) -> str:
        """Check that launching ``nodes`` would succeed, launching nothing; returns the line
        saying so (a failure raises)."""
        raise InputError(
            f"{self.cluster.source or self.cluster.name}: --dry-run: provider "
            f"{self.cluster.provider} cannot check a launch without launching"
        )

    def prepare(  # noqa: B027 - optional step
        self, machines: Sequence[Machine], *, wait: bool, timeout_s: float | None, log: Log
    ) -> None:
        """Make launched machines ready for work (reachable, set up); ``wait`` False (``up
        --no-wait-ssh``): do not wait for them, only say what was left undone."""

    def write_cluster_file(self, path: Path | None, machines: Sequence[Machine]) -> Path:
        """Write the cluster file that reaches ``machines`` to ``path`` (None: the default
        place); only for a lifecycle with a :attr:`cluster_file_word`."""
        raise NotImplementedError(f"{type(self).__name__} writes no cluster file")


def make_lifecycle(cluster: Cluster, purpose: str) -> NodeLifecycle:
    """What launches, lists and terminates ``cluster``'s machines (its kind's ``lifecycle``);
    one line naming ``purpose`` and the providers that have one when its provider has none."""
    kind = provider_kind(cluster.provider)
    where = cluster.source or cluster.name
    if kind is None or kind.lifecycle is None:
        launching = [k.name for k in provider_kinds() if k.launches_nodes]
        why = "which has no machines" if kind is None else "whose machines exist without hadar"
        raise InputError(
            f"{where}: provider: {purpose} does not apply to a provider: {cluster.provider} "
            f"cluster, {why} (providers that launch machines: {', '.join(launching) or 'none'})"
        )
    lifecycle: NodeLifecycle = load_factory(kind.lifecycle, f"{where}: {purpose}")(cluster)
    return lifecycle
