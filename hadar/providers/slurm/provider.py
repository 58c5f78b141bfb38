"""Slurm provider: each node of the cluster is a Slurm allocation, every command a job step.

A node's allocation (``salloc --no-shell -N1 -J hadar.<run-id>.<node>``, with the node's GPUs as
gres, the ``slurm:`` section's partition, account, QoS and time limit) is made when the node is
first checked and kept for the run; commands run in it with ``srun --jobid``: a worker with
``CUDA_VISIBLE_DEVICES`` in its environment asks for that many GPUs of the allocation
(``--gres``), and Slurm, not the coordinator, picks the devices and sets
``CUDA_VISIBLE_DEVICES``; other commands (the probe, clean-up) share the allocation
(``--overlap``). Work directories are ``<base_dir>/<run-id>/<node>`` on the file system the
coordinator and the nodes share (a cluster's home or scratch), so files move by verified copies.

Before anything is allocated the provider asks Slurm whether it would run each node's request
(``sbatch --test-only``): a partition, account, QoS, node or gres Slurm refuses is one line,
exit 2. Every job id is recorded in ``<base_dir>/<run-id>/slurm-jobs`` before it is used, so
``close`` (the end of a run, ``hadar stop``, SIGTERM) and a later provider of the same run (after
a crash: ``--resume``) cancel exactly the run's allocations. An allocation Slurm revokes
(preemption, ``scancel``, its time limit) makes the node unreachable until a new one is granted.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shlex
import shutil
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hadar.core.cluster import Cluster, Node
from hadar.core.errors import InputError, UnreachableNodeError
from hadar.core.io import write_text
from hadar.core.safe_paths import confined
from hadar.providers import health
from hadar.providers.base import (
    PROBE_TIMEOUT_S,
    CommandResult,
    NodeHealth,
    load_section,
)
from hadar.providers.local.provider import run_process
from hadar.providers.slurm import SlurmNode, SlurmSettings
from hadar.providers.slurm.commands import GRANTED, Slurm, SlurmUnreachable, last_line
from hadar.providers.transfer import FolderFiles
from hadar.providers.transport import node_transport

DEFAULT_BASE_DIR = "~/.hadar/slurm-nodes"
JOBS_FILE = "slurm-jobs"
"""The run's Slurm job ids, one a line, under ``<base_dir>/<run-id>/``."""
JOB_NAME_PREFIX = "hadar."
_JOBS_FILE_LOCK = threading.Lock()
"""One writer of a jobs file at a time (a run replaces its provider when its cluster file
changes; the old one releases its allocations while the new one records its own)."""


def job_name(run_id: str, node: str) -> str:
    """The Slurm job name of ``node``'s allocation in run ``run_id``."""
    return f"{JOB_NAME_PREFIX}{run_id}.{node}"


@dataclass(frozen=True)
class Allocation:
    """A node's Slurm allocation: the job, the Slurm node it landed on, that node's address."""

    job_id: str
    slurm_node: str
    address: str


_REFUSALS = (
    (re.compile(r"invalid partition", re.I), "partition"),
    (re.compile(r"invalid account|account.*(not|invalid)", re.I), "account"),
    (re.compile(r"invalid qos|qos.*(not|invalid)", re.I), "qos"),
    (re.compile(r"invalid node name", re.I), "slurm_node"),
    (re.compile(r"time limit", re.I), "time_limit"),
)


class SlurmProvider(FolderFiles):
    """Nodes are Slurm allocations; commands run in them as job steps."""

    def __init__(
        self,
        cluster: Cluster,
        run_id: str,
        *,
        base_dir: str | Path | None = None,
        python: str | None = None,
        trust_new_hosts: bool | None = None,  # accepted for a uniform CLI; no host keys here
    ) -> None:
        super().__init__(cluster, run_id)
        self.settings: SlurmSettings = load_section(cluster, "slurm", SlurmSettings)
        self.where = cluster.source or cluster.name
        self.slurm = Slurm(self.settings.slurm_conf, self.where)
        base = base_dir or DEFAULT_BASE_DIR
        self.base_dir = Path(os.path.expanduser(str(base))).resolve()
        py = python or self.settings.python
        self._python = shlex.split(py) if py else [sys.executable]
        self._alloc: dict[str, Allocation] = {}
        self._granted: set[str] = set()
        """Every job id this provider was granted (what :meth:`close` cancels)."""
        self._locks = {n: threading.Lock() for n in cluster.node_names}
        self._check_partition()
        self.release_recorded()  # a crashed session's allocations (``--resume``)
        for node in cluster.nodes:
            self._test(node)

    # -- requests ----------------------------------------------------------------------------
    def _slurm_node(self, node: Node) -> str | None:
        return node_transport(self.cluster, node, SlurmNode).slurm_node

    def gres(self, node: Node, share: int | None = None) -> str:
        """The node's GPUs as a gres request (``gpu:v100:2``); ``share``: that many of them, of
        the node's one type (any type when it has several)."""
        types = {t: n for t, n in sorted(node.gpus.items()) if n > 0}
        if share is not None:
            if len(types) == 1:
                (t,) = types
                return f"gpu:{self.settings.gres_types.get(t, t)}:{share}"
            return f"gpu:{share}"
        return ",".join(f"gpu:{self.settings.gres_types.get(t, t)}:{n}" for t, n in types.items())

    def _request(self, node: Node) -> list[str]:
        s = self.settings
        argv = ["-N1", "-n1", f"--cpus-per-task={node.num_gpus * s.cpus_per_gpu + 1}"]
        argv += [f"--partition={s.partition}"] if s.partition else []
        argv += [f"--account={s.account}"] if s.account else []
        argv += [f"--qos={s.qos}"] if s.qos else []
        argv += [f"--time={s.time_limit}"] if s.time_limit else []
        slurm_node = self._slurm_node(node)
        argv += [f"--nodelist={slurm_node}"] if slurm_node else []
        gres = self.gres(node)
        return argv + ([f"--gres={gres}"] if gres else [])

    def _check_partition(self) -> None:
        partitions = self.slurm.partitions()  # Slurm not reachable: one line
        p = self.settings.partition
        if p is not None and p not in partitions:
            raise InputError(
                f"{self.where}: slurm.partition: Slurm has no partition {p!r} "
                f"(partitions: {', '.join(partitions) or 'none'})"
            )

    def _test(self, node: Node) -> None:
        """Ask Slurm whether it would grant ``node``'s request (nothing is allocated)."""
        res = self.slurm.call(["sbatch", "--test-only", *self._request(node), "--wrap", "true"])
        if res.returncode == 0:
            return
        why = last_line(res.stderr)
        s = self.settings
        values = {
            "partition": s.partition,
            "account": s.account,
            "qos": s.qos,
            "slurm_node": self._slurm_node(node),
            "time_limit": s.time_limit,
        }
        for pattern, key in _REFUSALS:
            if pattern.search(res.stderr):
                field = f"nodes[{node.name}].slurm_node" if key == "slurm_node" else f"slurm.{key}"
                raise InputError(f"{self.where}: {field}: Slurm refuses {values[key]!r}: {why}")
        raise InputError(
            f"{self.where}: nodes[{node.name}]: Slurm refuses the request (gres "
            f"{self.gres(node) or 'none'}, partition {s.partition or 'default'}): {why}"
        )

    # -- allocations -------------------------------------------------------------------------
    def _jobs_file(self) -> Path:
        return confined(self.base_dir, self.run_id, JOBS_FILE, what="the run's Slurm job ids")

    def _record(self, job_id: str) -> None:
        path = self._jobs_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        with _JOBS_FILE_LOCK, open(path, "a", encoding="utf-8") as f:
            f.write(job_id + "\n")
            f.flush()
            os.fsync(f.fileno())
        self._granted.add(job_id)

    def _forget(self, job_ids: set[str]) -> None:
        """Take released job ids out of the jobs file (deleted once empty)."""
        with _JOBS_FILE_LOCK:
            keep = [j for j in self.recorded_jobs() if j not in job_ids]
            path = self._jobs_file()
            if keep:
                write_text(path, "".join(f"{j}\n" for j in keep), durable=True)
            else:
                with contextlib.suppress(OSError):
                    path.unlink()

    def recorded_jobs(self) -> list[str]:
        """The job ids this run recorded (its allocations, past and present)."""
        path = self._jobs_file()
        if not path.is_file():
            return []
        return [ln.strip() for ln in path.read_text().splitlines() if ln.strip().isdigit()]

    def release_recorded(self) -> list[str]:
        """Cancel every allocation of this run still known to Slurm: those recorded, and any
        named after the run (one granted while its id was being recorded); returns their ids."""
        names = {job_name(self.run_id, n) for n in self.cluster.node_names}
        recorded = set(self.recorded_jobs())
        alive = [j.job_id for j in self.slurm.jobs() if j.job_id in recorded or j.name in names]
        self.slurm.cancel(alive)
        self._forget(recorded)
        return alive

    def allocation(self, node: Node | str, verify: bool = False) -> Allocation:
        """``node``'s allocation, made now if it has none (or, with ``verify``, if Slurm no
        longer runs it). Raises UnreachableNodeError when Slurm does not grant one in time."""
        n = self.node(node)
        with self._locks.setdefault(n.name, threading.Lock()):
            alloc = self._alloc.get(n.name)
            if alloc is not None and verify:
                job = self.slurm.job(alloc.job_id)
                if job is None or job.state != "RUNNING":
                    self._alloc.pop(n.name, None)
                    alloc = None
            if alloc is None:
                alloc = self._allocate(n)
                self._alloc[n.name] = alloc
            return alloc

    def _allocate(self, node: Node) -> Allocation:
        wait = self.settings.grant_timeout_s
        argv = ["salloc", "--no-shell", f"--immediate={math.ceil(wait)}"]
        argv += [f"--job-name={job_name(self.run_id, node.name)}", *self._request(node)]
        res = self.slurm.call(argv, timeout_s=wait + 30)
        m = GRANTED.search(res.stderr + res.stdout)
        if m is None:
            raise UnreachableNodeError(
                f"node {node.name}: Slurm granted no allocation within {wait:g} s "
                f"(partition {self.settings.partition or 'default'}, gres {self.gres(node) or 'none'}): "
                f"{last_line(res.stderr)}"
            )
        job_id = m.group(1)
        self._record(job_id)
        job = self.slurm.job(job_id)
        granted = self.slurm.job_gres(job_id)
        wanted = {self.settings.gres_types.get(t, t): c for t, c in node.gpus.items() if c > 0}
        if job is None or not job.nodes or granted != wanted:
            self.slurm.cancel([job_id])
            raise UnreachableNodeError(
                f"node {node.name}: Slurm allocation {job_id} holds gres {granted or 'none'}, "
                f"not the node's {wanted or 'none'} (released)"
            )
        address = self.settings.rendezvous_address or self.slurm.node_address(job.nodes[0])
        return Allocation(job_id, job.nodes[0], address)

    def allocations(self) -> dict[str, Allocation]:
        """The nodes' current allocations (as far as this provider knows)."""
        return dict(self._alloc)

    def revoke(self, node: str) -> None:
        """Give ``node``'s allocation back to Slurm (the node left a live node stream)."""
        alloc = self._alloc.pop(node, None)
        if alloc is not None:
            self.slurm.cancel([alloc.job_id])

    # -- the NodeProvider interface ------------------------------------------------------------
    def workdir(self, node: Node | str) -> str:
        name = self.dir_name(node)
        return str(
            confined(self.base_dir, self.run_id, name, what=f"node {name}: working directory")
        )

    def rendezvous_address(self, node: Node | str) -> str:
        if self.settings.rendezvous_address is not None:
            return self.settings.rendezvous_address
        return self.allocation(node).address

    def base_env(self) -> Mapping[str, str]:
        return self.slurm.env

    def step(self, node: Node, alloc: Allocation, env: Mapping[str, str] | None) -> list[str]:
        """The ``srun`` prefix of a command on ``node``: a worker given ``CUDA_VISIBLE_DEVICES``
        gets that many of the allocation's GPUs from Slurm (which sets the variable); any other
        command shares the allocation."""
        argv = [
            "srun",
            f"--jobid={alloc.job_id}",
            "-N1",
            "-n1",
            f"--chdir={self._workdir(node)}",
            "--export=ALL",
            "--quiet",
            "--kill-on-bad-exit=1",
        ]
        visible = [d for d in (env or {}).get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
        if visible and node.num_gpus:
            cpus = len(visible) * self.settings.cpus_per_gpu
            return argv + [
                "--exact",
                f"--cpus-per-task={cpus}",
                f"--gres={self.gres(node, len(visible))}",
            ]
        return argv + ["--overlap"]

    def run(
        self,
        node: Node | str,
        argv: Sequence[str],
        timeout_s: float | None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        n = self.node(node)
        alloc = self.allocation(n)
        res = run_process(
            [*self.step(n, alloc, env), *argv],
            None,
            timeout_s,
            self._env(env),
            self.settings.kill_grace_s,
        )
        if not res.ok:
            job = self.slurm.job(alloc.job_id)
            if job is None or job.state != "RUNNING":  # preempted, cancelled, out of time
                with self._locks.setdefault(n.name, threading.Lock()):
                    if self._alloc.get(n.name) == alloc:
                        self._alloc.pop(n.name)
                raise UnreachableNodeError(
                    f"node {n.name}: Slurm allocation {alloc.job_id} on {alloc.slurm_node} was "
                    f"revoked ({job.state.lower() if job else 'ended'}): {res.tail(1)}"
                )
        return res

    def check(self, node: Node | str, timeout_s: float = PROBE_TIMEOUT_S) -> NodeHealth:
        n = self.node(node)
        start = time.monotonic()
        try:
            alloc = self.allocation(n, verify=True)
            res = self.run(n, [*self._python, "-c", health.SNIPPET], timeout_s)
        except (UnreachableNodeError, SlurmUnreachable) as exc:
            return NodeHealth(n.name, False, error=str(exc), seconds=time.monotonic() - start)
        address = f"{alloc.slurm_node} (job {alloc.job_id})"
        return health.node_health(
            n.name, address, res, time.monotonic() - start, timeout_s, self._python[0]
        )

    def remove_workdir(self, node: Node | str) -> None:
        shutil.rmtree(self.workdir(node), ignore_errors=True)  # confined: never outside base_dir

    def close(self) -> None:
        """Cancel the allocations this provider was granted and forget their ids."""
        with contextlib.suppress(InputError):
            ids = set(self._granted)
            self.slurm.cancel(sorted(ids, key=int))
            self._alloc.clear()
            self._forget(ids)
            self._granted -= ids
            with contextlib.suppress(OSError):
                self._jobs_file().parent.rmdir()  # empty: the node directories are gone
