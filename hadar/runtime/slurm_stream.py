"""A live node stream from a real Slurm (``hadar run --node-stream slurm:PARTITION``).

BFTrainer's idle nodes, taken from Slurm as they come: a node of the run's cluster (a ``provider:
slurm`` node, each an allocation in a preemptible partition) is *up* while its Slurm node is
usable (``idle``, or busy with this run's own allocations only: not down, drained, planned for
another job or not responding) and no other job runs on it, and while the run's allocation on it,
if it holds one, still runs. A node that stops being up *leaves*: another job took it (Slurm
preempted the run's allocation, or shares the node), an admin drained it, or Slurm revoked the
allocation; the run's allocation there is cancelled, the copy on it is preempted
(hadar/runtime/node_stream.py) and the node gets no work until Slurm shows it idle again, when
it *joins* from the next round. The stream's clock is the run's (``started_at``), as for a
replayed stream. Slurm is asked at every round's start, before and after every copy, and every
``poll_s`` seconds in between.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from hadar.core.cluster import Cluster
from hadar.core.errors import InputError
from hadar.core.node_stream import NodeEvent
from hadar.providers.slurm import SlurmNode, SlurmSettings
from hadar.providers.slurm.commands import Slurm, SlurmJob
from hadar.providers.slurm.provider import Allocation, job_name
from hadar.providers.transport import load_section, node_transport

PREFIX = "slurm:"
"""``--node-stream slurm:PARTITION``: the live stream of that partition's idle nodes."""
POLL_S = 1.0
REJOIN_S = 10.0
"""How long a node that left must be seen up before it rejoins: Slurm cancels a preempted
allocation before the job that preempted it starts, so the node looks idle for a few seconds in
between (also BFTrainer's point: a fragment of one poll between two jobs is not worth using)."""
USABLE_STATES = frozenset({"idle", "mixed", "allocated", "completing"})
"""Node states (``sinfo %T``) in which a node may be in the pool: idle, or busy with the run's
own allocations (a job of another user shows too; it keeps the node out). A flag (``idle*`` not
responding, ``idle~`` powered off, ``idle#`` powering up) keeps it out as well."""
ACTIVE_JOB_STATES = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "RESIZING"})


def is_live(value: str | None) -> bool:
    """Whether a ``--node-stream`` value names a live Slurm stream."""
    return value is not None and value.startswith(PREFIX)


@dataclass(frozen=True)
class SlurmStreamSpec:
    """A checked ``--node-stream slurm:PARTITION``: the partition and each node's Slurm node."""

    partition: str
    slurm_nodes: Mapping[str, str]
    """Cluster node -> Slurm node."""


def check_slurm_stream(value: str, cluster: Cluster) -> SlurmStreamSpec:
    """The stream ``value`` names, checked against Slurm: one line, exit 2, when the cluster is
    not a Slurm one, Slurm is not reachable, the partition is unknown or a node is not in it."""
    partition = value[len(PREFIX) :]
    where = f"--node-stream {value}"
    if cluster.provider != "slurm":
        raise InputError(
            f"{where}: a live Slurm stream needs a provider: slurm cluster (cluster "
            f"{cluster.name} uses the {cluster.provider} provider)"
        )
    if not partition:
        raise InputError(f"{where}: name a partition (slurm:PARTITION)")
    settings = load_section(cluster, "slurm", SlurmSettings)
    slurm = Slurm(settings.slurm_conf, where)
    if partition not in slurm.partitions():
        raise InputError(f"{where}: Slurm has no partition {partition!r}")
    states = slurm.node_states(partition)
    mapping = {
        n.name: node_transport(cluster, n, SlurmNode).slurm_node or n.name for n in cluster.nodes
    }
    for node, slurm_node in mapping.items():
        if slurm_node not in states:
            raise InputError(
                f"{where}: node {node} (Slurm node {slurm_node}) is not in partition {partition}"
            )
    return SlurmStreamSpec(partition, mapping)


class SlurmWatcher:
    """The live stream of one run: which nodes are up, and acting on leaves as they come (the
    interface of :class:`hadar.runtime.node_stream.LeaveWatcher`)."""

    live = True

    def __init__(
        self,
        spec: SlurmStreamSpec,
        slurm: Slurm,
        run_id: str,
        started_at: float,
        allocations: Callable[[], Mapping[str, Allocation]],
        vanish: Callable[[str], list[int]],
        on_leave: Callable[[NodeEvent, list[int]], None],
        on_join: Callable[[NodeEvent], None],
        poll_s: float = POLL_S,
        rejoin_s: float = REJOIN_S,
    ) -> None:
        self.spec, self.slurm, self.started_at = spec, slurm, started_at
        self._ours = job_name(run_id, "")
        self._allocations, self._vanish = allocations, vanish
        self._on_leave, self._on_join = on_leave, on_join
        self.poll_s, self.rejoin_s = poll_s, rejoin_s
        self._since: dict[str, float] = {}
        """A node that left and is seen up again: since when (it rejoins after ``rejoin_s``)."""
        self._up: set[str] = set()
        self._left: dict[str, list[float]] = {}
        self._lock = threading.Lock()
        self._poll_lock = threading.Lock()
        """One poll at a time: a slower poll never applies an older view after a newer one."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="slurm-stream", daemon=True)

    def now(self) -> float:
        """Seconds since the run started (the stream's clock)."""
        return time.time() - self.started_at

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)

    def up_nodes(self, names: Iterable[str]) -> set[str]:
        """The nodes of ``names`` up now (Slurm asked now)."""
        self.poll()
        with self._lock:
            return set(names) & self._up

    def next_join(self, names: Iterable[str]) -> float | None:
        """When to look again for a join (a live stream never ends)."""
        return self.now() + self.poll_s

    def left_since(self, node: str, t: float) -> bool:
        """Whether ``node`` left after stream time ``t``, or is not up now (Slurm asked now)."""
        self.poll()
        with self._lock:
            return any(x > t for x in self._left.get(node, ())) or node not in self._up

    def usable(self, states: Mapping[str, str], jobs: Iterable[SlurmJob]) -> set[str]:
        """The cluster nodes up given Slurm's node states and jobs (pure)."""
        active = [j for j in jobs if j.state in ACTIVE_JOB_STATES]
        foreign = {n for j in active if not j.name.startswith(self._ours) for n in j.nodes}
        running = {j.job_id for j in active if j.state == "RUNNING"}
        allocations = self._allocations()
        up = set()
        for node, slurm_node in self.spec.slurm_nodes.items():
            alloc = allocations.get(node)
            if (
                states.get(slurm_node, "").lower() in USABLE_STATES
                and slurm_node not in foreign
                and (alloc is None or alloc.job_id in running)
            ):
                up.add(node)
        return up

    def poll(self) -> None:
        """Ask Slurm, then act on what changed: a leave cancels the run's allocation on the node
        (``vanish``) and is reported (``on_leave``); a join is reported (``on_join``)."""
        with self._poll_lock:
            states = self.slurm.node_states(self.spec.partition)
            up = self.usable(states, self.slurm.jobs())
            t = self.now()
            with self._lock:
                for node in list(self._since):
                    if node not in up:
                        del self._since[node]
                for node in up - self._up:
                    if node in self._left and t - self._since.setdefault(node, t) < self.rejoin_s:
                        up.discard(node)  # not up long enough since it left
                gone, new = self._up - up, up - self._up
                self._up = up
                for node in gone:
                    self._left.setdefault(node, []).append(t)
            for node in sorted(gone):
                self._on_leave(NodeEvent(t, node, "leave"), self._vanish(node))
            for node in sorted(new):
                self._on_join(NodeEvent(t, node, "join"))

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.poll()
            except InputError:  # Slurm silent for a moment: ask again at the next poll
                continue
