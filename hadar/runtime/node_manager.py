"""The coordinator's node manager: which nodes are up each round and how to reach them.

It re-reads the cluster file when it changes (nodes join and leave), asks the provider which
nodes it offers (reclaimed cloud instances drop out), replays a ``--node-stream``, probes new
nodes and re-probes nodes marked down, numbers their GPUs (``gpu_inventory``) and keeps each
node's health in the journal. One job: nodes; it runs no round and knows no job.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hadar.clusters import load_cluster
from hadar.core.cluster import Cluster
from hadar.core.errors import InputError, UnreachableNodeError
from hadar.core.node_stream import NodeEvent, NodeStream, load_node_stream
from hadar.core.safe_paths import remove_tree
from hadar.providers.base import NodeProvider, make_provider
from hadar.providers.registry import provider_kind
from hadar.runtime.config import RunConfig, load_config, save_config
from hadar.runtime.dispatch import CopyOutcome, CopyTask, run_copy, stop_warm_servers
from hadar.runtime.faults import placement_nodes
from hadar.runtime.gpu_inventory import (
    GpuMismatchError,
    GpuReport,
    NodeGpus,
    gpu_report,
    number_nodes,
)
from hadar.runtime.identity import cluster_digest
from hadar.runtime.journal import EventLog, Journal
from hadar.runtime.node_stream import PREEMPTED, LeaveWatcher, kill_processes_in
from hadar.runtime.slurm_stream import SlurmStreamSpec, SlurmWatcher, check_slurm_stream, is_live

ProviderFactory = Callable[..., NodeProvider]
"""``(cluster, run_id, **options) -> NodeProvider``: :func:`hadar.providers.base.make_provider`, or a
test's or benchmark's own."""


RETIRE_WAIT_S = 40.0
"""How long :meth:`NodeManager.shutdown` waits, in all, for the warm servers of removed nodes to
stop (the stop command's own timeout is 30 s)."""


class StopRequested(Exception):
    """Ctrl-C, SIGTERM or SIGHUP: the run stopped cleanly after saving its state."""


class NodeManager:
    """The nodes of one run: the cluster file, the provider, health, GPU numbering, stream."""

    def __init__(
        self,
        rundir: Path,
        cfg: RunConfig,
        cluster: Cluster,
        stream: NodeStream | SlurmStreamSpec | None,
        journal: Journal,
        events: EventLog,
        stop: threading.Event,
        provider_options: dict[str, Any] | None = None,
        provider_factory: ProviderFactory = make_provider,
    ) -> None:
        self.rundir, self.cfg, self.cluster = rundir, cfg, cluster
        self.journal, self.events, self._stop = journal, events, stop
        self.provider_options = dict(provider_options or {})
        self._factory = provider_factory
        self._cluster_mtime = cluster_mtime(cfg.cluster)
        self.provider: NodeProvider = self._make_provider()
        self.leaves: LeaveWatcher | SlurmWatcher | None = (
            None if stream is None else self._leave_watcher(stream)
        )
        self.gpus: dict[str, NodeGpus] = {}
        """Each probed node's numbered GPUs (hadar/runtime/gpu_inventory.py), this process's."""
        self.preflight_done = False
        self._retiring: list[threading.Thread] = []
        """Threads stopping the warm servers of nodes the cluster file dropped (:meth:`_retire`)."""

    def _make_provider(self) -> NodeProvider:
        opts = dict(self.provider_options)
        if shares_machine(self.cluster) or shared_filesystem(self.cluster):
            opts.setdefault("base_dir", str(self.rundir / "nodes"))
        return self._factory(self.cluster, self.cfg.run_id, **opts)

    def set_node(self, name: str, up: bool, r: int, error: str | None = None) -> None:
        """Record a node's health in the journal."""
        self.journal.set_node(name, up, r, error)

    def mark_down(self, name: str, r: int, error: str | None) -> None:
        """A copy found ``name`` unreachable or hung: down until a re-probe finds it."""
        self.set_node(name, False, r, error)
        self.events.emit("node-down", round=r, node=name, error=error)

    def available(self, r: int) -> Cluster:
        """Nodes that are up this round: re-read the cluster file (joins and leaves), ask the
        provider (reclaimed cloud instances drop out), re-probe nodes marked down."""
        mtime = cluster_mtime(self.cfg.cluster)
        if mtime != self._cluster_mtime:
            new = load_cluster(self.cfg.cluster)
            self.events.emit("cluster-changed", round=r, nodes=list(new.node_names))
            # a node declared differently is probed and numbered again
            self.gpus = {
                n: g
                for n, g in self.gpus.items()
                if n in new.node_index
                and n in self.cluster.node_index
                and new.node(n) == self.cluster.node(n)
            }
            removed = [n for n in self.cluster.node_names if n not in new.node_index]
            old_provider = self.provider
            self.cluster, self._cluster_mtime = new, mtime
            self._record_cluster_digest()
            self.provider = self._make_provider()
            self._retire(old_provider, removed, r)
        offered = {n.name for n in self.provider.nodes()} & set(self.cluster.node_names)
        if self.leaves is not None:
            offered &= self._stream_nodes(r)
        states = self.journal.node_states()
        up = []
        probed: dict[str, GpuReport] = {}
        for name in self.cluster.node_names:
            if name not in offered:
                continue
            known = states.get(name)
            if (
                known is None
                or (known[0] and name not in self.gpus)
                or (not known[0] and (r - known[1]) % self.cfg.probe_every == 0)
            ):
                health = self.provider.check(name, timeout_s=min(30.0, self.cfg.round_s))
                self.set_node(name, health.reachable, r, health.error)
                if known is not None and health.reachable:
                    self.events.emit("node-up", round=r, node=name)
                if known is None and not health.reachable:
                    self.events.emit("node-down", round=r, node=name, error=health.error)
                if health.reachable:
                    up.append(name)
                    probed[name] = gpu_report(health.details)
            elif known[0]:
                up.append(name)
        rejected = self._number_gpus(probed, r)
        up = [n for n in up if n not in rejected]
        if not up:
            states = self.journal.node_states()
            reasons = "; ".join(
                _down_reason(n, states.get(n), self.cluster.provider)
                for n in self.cluster.node_names
            )
            raise UnreachableNodeError(
                f"{self.cfg.cluster}: no node of cluster {self.cluster.name} is reachable: "
                f"{reasons}"
            )
        return self.cluster.subset(up)

    def _number_gpus(self, probed: dict[str, GpuReport], r: int) -> set[str]:
        """Number the GPUs of the nodes just probed (a thin hook: gpu_inventory does the work).
        Before the first round a mismatch is bad input; later it leaves the node down. Returns
        the nodes left out."""
        numbered, problems = number_nodes(
            [self.cluster.node(n) for n in probed],
            probed,
            shared_machine=shares_machine(self.cluster),
            numbered={n: g for n, g in self.gpus.items() if n not in probed},
        )
        if problems and not self.preflight_done:
            raise GpuMismatchError(next(iter(problems.values())))
        self.preflight_done = True
        for name, why in problems.items():
            self.set_node(name, False, r, why)
            self.events.emit("node-down", round=r, node=name, error=why)
        for name, g in numbered.items():
            self.gpus[name] = g
            self.events.emit("gpus", round=r, node=name, **g.as_dict())
        return set(problems)

    def _record_cluster_digest(self) -> None:
        """A cluster file change seen during the run is part of the run: record its digest in
        run.json so ``--resume`` accepts it."""
        if not (self.rundir / "run.json").is_file():
            return
        cfg = load_config(self.rundir)
        if cfg.identity is not None:
            identity = cfg.identity.model_copy(
                update={"cluster_sha256": cluster_digest(cfg.cluster)}
            )
            save_config(cfg.model_copy(update={"identity": identity}), self.rundir)

    # -- the node stream ---------------------------------------------------------------------
    def _leave_watcher(self, stream: NodeStream | SlurmStreamSpec) -> LeaveWatcher | SlurmWatcher:
        """The watcher that acts when the stream says a node leaves: a replayed stream kills the
        node's processes; a live Slurm stream cancels the run's allocation there."""

        def on_leave(event: NodeEvent, killed: list[int]) -> None:
            self.events.emit("node-leave", node=event.node, at_s=event.time, killed=len(killed))

        if isinstance(stream, SlurmStreamSpec):
            from hadar.providers.slurm.provider import SlurmProvider

            def provider() -> SlurmProvider:
                assert isinstance(self.provider, SlurmProvider)
                return self.provider

            def revoke(node: str) -> list[int]:
                alloc = provider().allocations().get(node)
                provider().revoke(node)
                return [] if alloc is None else [int(alloc.job_id)]

            def on_join(event: NodeEvent) -> None:
                self.events.emit("node-join", node=event.node, at_s=event.time)

            return SlurmWatcher(
                stream,
                provider().slurm,
                self.cfg.run_id,
                self.cfg.started_at,
                lambda: provider().allocations(),
                revoke,
                on_leave,
                on_join,
            )

        def vanish(node: str) -> list[int]:
            return kill_processes_in(Path(self.provider.workdir(node)))

        return LeaveWatcher(stream, self.cfg.started_at, vanish, on_leave)

    def _stream_nodes(self, r: int) -> set[str]:
        """The nodes the stream has up now; while none is, wait for the next join."""
        assert self.leaves is not None
        names, waiting = self.cluster.node_names, False
        while not (up := self.leaves.up_nodes(names)):
            at = self.leaves.next_join(names)
            if at is None:
                raise UnreachableNodeError(
                    f"{self.cfg.node_stream}: no node of cluster {self.cluster.name} is up "
                    "from here to the stream's end"
                )
            if not waiting:  # a live stream looks again every poll: one event per wait
                self.events.emit("waiting", round=r, next_join_s=at, note="no node is up")
                waiting = True
            while self.leaves.now() < at:
                if self._stop.is_set():
                    raise StopRequested()
                time.sleep(min(0.5, at - self.leaves.now()))
        return up

    def run_copy(self, task: CopyTask, local: Path) -> CopyOutcome:
        """One copy on its nodes; with a node stream, a copy whose node is not up when it
        starts, or leaves before it returns, is preempted: nothing it did is reported."""
        if self.leaves is None:
            return run_copy(self.provider, task, local)
        nodes, t0 = placement_nodes(task.placement), self.leaves.now()
        gone = [n for n in nodes if self.leaves.left_since(n, t0)]
        outcome = None if gone else run_copy(self.provider, task, local)
        gone = gone or [n for n in nodes if self.leaves.left_since(n, t0)]
        if outcome is not None and not gone:
            return outcome
        return CopyOutcome(
            task,
            PREEMPTED,
            error=f"node {'+'.join(gone)} left the pool (node stream): the copy's worker was "
            "killed and its steps of this round are lost",
        )

    # -- the end -----------------------------------------------------------------------------
    def _retire(self, provider: NodeProvider, removed: list[str], r: int) -> None:
        """Nodes the cluster file no longer lists: stop their warm servers (ending any copy still
        running there) through the provider that reached them, then close it; in the background, so
        that an unreachable node does not hold the round up (best effort; waited for at
        :meth:`shutdown`). Their work directories are kept (the node may come back)."""
        for name in removed:
            self.events.emit("node-removed", round=r, node=name)

        def retire() -> None:
            with contextlib.suppress(Exception):
                if self.cfg.warm_workers and removed:
                    stop_warm_servers(provider, removed, zygotes=False)  # others use it
            with contextlib.suppress(Exception):
                provider.close()

        thread = threading.Thread(target=retire, name="retire-nodes", daemon=True)
        thread.start()
        self._retiring.append(thread)

    def shutdown(self, clean: bool) -> None:
        """Stop the nodes' warm servers; after a completed run (``clean``) delete their work
        directories unless ``keep_node_dirs``. Best effort."""
        deadline = time.monotonic() + RETIRE_WAIT_S  # all of them together (they run at once)
        for thread in self._retiring:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        nodes = list(self.cluster.node_names)
        with contextlib.suppress(Exception):
            if self.cfg.warm_workers:
                stop_warm_servers(self.provider, nodes)
        with contextlib.suppress(Exception):
            self.provider.end_strays()  # the servers a planted link kept stop from reaching
        if clean:
            with contextlib.suppress(Exception):  # never through a link planted meanwhile
                remove_tree(self.rundir / "incoming")
            if not self.cfg.keep_node_dirs:
                for node in nodes:
                    with contextlib.suppress(Exception):
                        self.provider.remove_workdir(node)
                with contextlib.suppress(OSError):
                    # empty folders the local provider left; a file keeps its folders
                    remove_tree(self.rundir / "nodes", only_empty=True)


def load_stream(cfg: RunConfig, cluster: Cluster) -> NodeStream | SlurmStreamSpec | None:
    """The checked ``--node-stream`` (None without one): a live Slurm partition
    (``slurm:PARTITION``, a ``provider: slurm`` cluster), or a replayed file, whose nodes vanish
    by having their processes killed, so it needs nodes that run on this machine."""
    if cfg.node_stream is None:
        return None
    if is_live(cfg.node_stream):
        return check_slurm_stream(cfg.node_stream, cluster)
    stream = load_node_stream(cfg.node_stream, cluster.node_names, cfg.cluster)
    if not shares_machine(cluster):
        raise InputError(
            f"--node-stream {cfg.node_stream}: real runs replay a node stream on local "
            f"nodes only (cluster {cluster.name} uses the {cluster.provider} provider)"
        )
    return stream


def _down_reason(node: str, state: tuple[bool, int, str | None] | None, provider: str) -> str:
    """Why ``node`` is down, on one line (its last health-check error names host:port)."""
    if state is None:
        return f"node {node}: not offered by the {provider} provider"
    return " ".join((state[2] or f"node {node}: down since round {state[1]}").split())


def cluster_mtime(path: str) -> float | None:
    """The cluster file's modification time (None if it is gone)."""
    from hadar.core.cluster_config import resolve_cluster_path

    p = resolve_cluster_path(path)
    return p.stat().st_mtime if p.exists() else None


def shared_filesystem(cluster: Cluster) -> bool:
    """Whether ``cluster``'s nodes see this machine's files (its provider's capability)."""
    kind = provider_kind(cluster.provider)
    return kind is not None and kind.shared_filesystem


def shares_machine(cluster: Cluster) -> bool:
    """Whether every node of ``cluster`` is this machine (its provider's capability)."""
    kind = provider_kind(cluster.provider)
    return kind is not None and kind.shares_machine
