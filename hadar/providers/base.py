"""The node-provider interface (in the spirit of Ray's autoscaler ``NodeProvider``).

A provider gives the coordinator uniform access to the machines of one :class:`Cluster`:
list them, check their health, move files into and out of a per-run working directory
(verified by sha256 on both ends), and run commands there with a timeout that kills the whole
process group. Implementations: :mod:`hadar.providers.local.provider` (processes on this machine),
:mod:`hadar.providers.ssh.provider` (paramiko) and :mod:`hadar.providers.aws.provider` (EC2 instances reached over SSH).

All methods are safe to call concurrently from several threads for *different* nodes (the
coordinator dispatches a round's copies in parallel); calls for the same node may also overlap.
"""

from __future__ import annotations

import posixpath
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hadar.core.cluster import Cluster, Node
from hadar.core.errors import HadarError, InputError
from hadar.core.safe_paths import SAFE_NAME_RULE, PathEscapeError, is_safe_name
from hadar.providers.registry import load_factory, provider_kind, provider_kinds
from hadar.providers.transport import load_section as load_section  # the providers' import


class NodeTransferError(HadarError):
    """A file could not be moved to or from a node (the node itself was reachable)."""

    exit_code = 1


class ChecksumMismatchError(NodeTransferError):
    """The sha256 of a transferred file differs between the two ends (or from the expected one)."""


class RemotePathError(PathEscapeError):
    """A node-relative path tried to leave the run's working directory."""


@dataclass(frozen=True)
class CommandResult:
    """What a command run on a node did. ``returncode`` is negative for a signal (local runs)."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def tail(self, lines: int = 5) -> str:
        """The last lines of stderr (else stdout), for one-line error reports."""
        text = (self.stderr or self.stdout).strip().splitlines()
        return " | ".join(text[-lines:])


@dataclass(frozen=True)
class NodeHealth:
    """The result of :meth:`NodeProvider.check`: reachability, software and GPUs seen."""

    node: str
    reachable: bool
    address: str | None = None
    python: str | None = None
    torch: str | None = None
    gpus: tuple[str, ...] = ()
    error: str | None = None
    seconds: float = 0.0
    details: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "reachable": self.reachable,
            "address": self.address,
            "python": self.python,
            "torch": self.torch,
            "gpus": list(self.gpus),
            "error": self.error,
            "seconds": round(self.seconds, 3),
        }


def check_run_id(run_id: str) -> str:
    """Run ids become directory names on every node: letters, digits, ``._-`` only."""
    if not is_safe_name(run_id):
        raise InputError(f"run id {run_id!r}: {SAFE_NAME_RULE}")
    return run_id


def confine(node: str, rel_path: str) -> str:
    """Normalise a node-relative POSIX path; refuse absolute paths and any escape via ``..``."""
    if not isinstance(rel_path, str) or not rel_path.strip():
        raise RemotePathError(f"node {node}: empty remote path")
    if rel_path.startswith("/") or rel_path.startswith("~"):
        raise RemotePathError(
            f"node {node}: remote path {rel_path!r} must be relative to the run's working directory"
        )
    norm = posixpath.normpath(rel_path)
    if norm in {".", ""} or norm == ".." or norm.startswith("../") or "\x00" in norm:
        raise RemotePathError(
            f"node {node}: remote path {rel_path!r} escapes the run's working directory"
        )
    return norm


PROBE_TIMEOUT_S = 60.0
"""Seconds a node probe (:meth:`NodeProvider.check`, ``hadar nodes check``) waits by default."""


class NodeProvider(ABC):
    """Access to the nodes of one cluster for one run (``run_id`` names the per-run directory)."""

    def __init__(self, cluster: Cluster, run_id: str) -> None:
        self.cluster = cluster
        self.run_id = check_run_id(run_id)

    @classmethod
    def check_setup(cls, cluster: Cluster) -> None:
        """Check what a run on ``cluster`` needs from this machine (credentials, key files)
        before the run writes anything: one line (InputError, exit 2, for a file the cluster
        file names) when something is missing. Nothing to check by default."""
        del cluster  # nothing to check by default

    # -- nodes -----------------------------------------------------------------------------
    def nodes(self) -> list[Node]:
        """The nodes currently available (with their GPUs). Cloud providers refresh this."""
        return list(self.cluster.nodes)

    def node(self, node: Node | str) -> Node:
        """Resolve a node name (or pass a :class:`Node` through)."""
        if isinstance(node, Node):
            return node
        try:
            return self.cluster.node(node)
        except KeyError:
            raise InputError(f"unknown node {node!r} in cluster {self.cluster.name}") from None

    def dir_name(self, node: Node | str) -> str:
        """The node's name as the last component of its working directory; a name outside the
        safe character set (a cluster built in code, not loaded from a file) is refused."""
        name = self.node(node).name
        if not is_safe_name(name):
            raise RemotePathError(f"node {name!r}: not a safe directory name ({SAFE_NAME_RULE})")
        return name

    def speed_factor(self, node: Node | str) -> float:
        """The fraction of its GPU's speed a node emulates (pass to the worker's --speed-factor)."""
        return self.node(node).speed_factor

    # -- per-node operations ---------------------------------------------------------------
    @abstractmethod
    def check(self, node: Node | str, timeout_s: float = PROBE_TIMEOUT_S) -> NodeHealth:
        """Probe a node. Never raises for an unreachable node: ``reachable`` is False instead."""

    @abstractmethod
    def workdir(self, node: Node | str) -> str:
        """Absolute path of this run's working directory on the node (all remote work is here)."""

    @abstractmethod
    def python(self, node: Node | str) -> list[str]:
        """The interpreter command that starts the worker on the node (``argv`` prefix)."""

    @abstractmethod
    def rendezvous_address(self, node: Node | str) -> str:
        """The address other gang members use to reach this node (torch.distributed)."""

    @abstractmethod
    def put(self, node: Node | str, local_path: str | Path, remote_rel_path: str) -> str:
        """Copy a local file into the node's workdir; returns the sha256 verified on both ends."""

    @abstractmethod
    def get(
        self,
        node: Node | str,
        remote_rel_path: str,
        local_path: str | Path,
        expected_sha256: str | None = None,
    ) -> str:
        """Copy a file out of the node's workdir; returns its sha256, verified on both ends
        (and against ``expected_sha256`` when given). Raises :class:`ChecksumMismatchError`."""

    @abstractmethod
    def sha256(self, node: Node | str, remote_rel_path: str) -> str:
        """The sha256 of a file in the node's workdir, computed on the node."""

    @abstractmethod
    def run(
        self,
        node: Node | str,
        argv: Sequence[str],
        timeout_s: float | None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        """Run ``argv`` in the node's workdir. On timeout the command's whole process group is
        killed (TERM, then KILL) and ``timed_out`` is set. Raises UnreachableNodeError if the
        node cannot be contacted or the connection drops."""

    def warm_zygote_dir(self, node: Node | str) -> str | None:
        """Where nodes that share one machine keep one process with torch imported, from which
        each node's warm server is forked (``nodes.warm``); None (the default): every node's
        warm server imports torch itself."""
        return None

    def remove_workdir(self, node: Node | str) -> None:  # noqa: B027 - optional hook
        """Delete the run's working directory on the node (optional clean-up)."""

    def end_strays(self) -> None:  # noqa: B027 - optional hook
        """End what the run left running on this machine that :meth:`run` can no longer reach
        (a node folder swapped for a link refuses every command there, ``nodes.warm stop``
        included). Best effort; providers whose nodes are other machines have nothing here."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections and other resources."""

    def __enter__(self) -> NodeProvider:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RunsThroughAnother(NodeProvider):
    """A provider that finds its nodes' machines itself (their lifecycle: launch, list,
    terminate) and runs everything on a node through another provider, the split of Ray's
    ``NodeProvider`` and ``CommandRunner``: AWS finds the running instances, SSH runs on them.
    A subclass implements :meth:`runner` (and ``check``, which must not raise)."""

    @abstractmethod
    def runner(self, node: Node | str) -> tuple[NodeProvider, str]:
        """The provider that runs commands on ``node``'s machine and the node's name there;
        raises UnreachableNodeError when the node has no machine now."""

    def workdir(self, node: Node | str) -> str:
        runner, name = self.runner(node)
        return runner.workdir(name)

    def python(self, node: Node | str) -> list[str]:
        runner, name = self.runner(node)
        return runner.python(name)

    def rendezvous_address(self, node: Node | str) -> str:
        runner, name = self.runner(node)
        return runner.rendezvous_address(name)

    def put(self, node: Node | str, local_path: str | Path, remote_rel_path: str) -> str:
        runner, name = self.runner(node)
        return runner.put(name, local_path, remote_rel_path)

    def get(
        self,
        node: Node | str,
        remote_rel_path: str,
        local_path: str | Path,
        expected_sha256: str | None = None,
    ) -> str:
        runner, name = self.runner(node)
        return runner.get(name, remote_rel_path, local_path, expected_sha256)

    def sha256(self, node: Node | str, remote_rel_path: str) -> str:
        runner, name = self.runner(node)
        return runner.sha256(name, remote_rel_path)

    def run(
        self,
        node: Node | str,
        argv: Sequence[str],
        timeout_s: float | None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        runner, name = self.runner(node)
        return runner.run(name, argv, timeout_s, env)

    def remove_workdir(self, node: Node | str) -> None:
        runner, name = self.runner(node)
        runner.remove_workdir(name)


def check_provider_setup(cluster: Cluster) -> None:
    """:meth:`NodeProvider.check_setup` of ``cluster``'s provider (nothing for a cluster with no
    provider to run on: :func:`make_provider` says so)."""
    kind = provider_kind(cluster.provider)
    if kind is not None:
        where = cluster.source or cluster.name
        cls = load_factory(kind.provider, f"{where}: the {cluster.provider} provider")
        check = getattr(cls, "check_setup", None)  # a factory function has none
        if check is not None:
            check(cluster)


def make_provider(cluster: Cluster, run_id: str, **options: Any) -> NodeProvider:
    """The provider for ``cluster.provider`` (its registered ``ProviderKind``). ``options`` are
    passed to the provider's constructor (e.g. ``trust_new_hosts=True`` for ssh/aws,
    ``base_dir=`` for local)."""
    kind = provider_kind(cluster.provider)
    if kind is None:
        where = f"{cluster.source}: provider" if cluster.source else "provider"
        raise InputError(
            f"{where}: {cluster.provider!r} clusters have no nodes to run on "
            f"(use one of {', '.join(k.name for k in provider_kinds())})"
        )
    where = cluster.source or cluster.name
    cls = load_factory(kind.provider, f"{where}: the {cluster.provider} provider")
    provider: NodeProvider = cls(cluster, run_id, **options)
    return provider
