"""Running one job (or HadarE copy) for one round on its node(s): stage the spec and the
job's consolidated checkpoint (refused unless the bytes sent match its recorded sha256), run the
worker (one process per GPU of a gang, each pinned to its GPUs by ``CUDA_VISIBLE_DEVICES`` and
placed in the gang by torchrun's ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
``MASTER_PORT``), fetch the result and the new checkpoint verified by sha256. Failures become
outcomes, never exceptions (except the run directory's own I/O errors, which the coordinator
turns into one-line stops)."""

from __future__ import annotations

import contextlib
import json
import random
import socket
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hadar.core.errors import HadarError, UnreachableNodeError
from hadar.core.io import write_json
from hadar.core.jobs import Job, Placement
from hadar.core.safe_paths import PathEscapeError, real_folder
from hadar.providers.base import ChecksumMismatchError, NodeProvider
from hadar.runtime.gpu_binding import GpuIds, rank_layout, worker_env

WORKER_MODULE = "nodes.worker"
CLEANUP_MODULE = "nodes.cleanup"


def worker_command(provider: NodeProvider, node: str, warm: bool) -> list[str]:
    """The argv prefix that runs one worker invocation on ``node``: through the node's warm
    server (``nodes.warm``: torch stays imported between rounds; forked from the machine's
    zygote where the provider's nodes share one) or as a fresh process."""
    if not warm:
        return [*provider.python(node), "-m", WORKER_MODULE]
    zygote = provider.warm_zygote_dir(node)
    via = ["--zygote", zygote] if zygote is not None else []
    return [*provider.python(node), "-m", "nodes.warm", "run", *via, "--"]


@dataclass(frozen=True)
class CopyTask:
    round: int
    attempt: int
    job: Job
    copy: int
    """The policy's copy number (0 = the whole job)."""
    tracker_copy: int
    """The Job Tracker's copy id."""
    placement: Placement
    steps: int
    deadline_s: float
    timeout_s: float
    checkpoint_in: Path | None
    checkpoint_sha256: str | None
    data_stream: int
    threads: int
    gpus: GpuIds
    """The GPU ids the copy holds, ``{node: {type: ids}}`` (journalled; sticky across rounds)."""
    devices: GpuIds
    """The real device indices behind ``gpus`` (what ``CUDA_VISIBLE_DEVICES`` lists)."""
    warm: bool = True
    spec: Mapping[str, Any] | None = None
    """This round's training spec when it differs from the job's (an elastic job's per-rank
    batch and scaled learning rate, ``hadar/runtime/elastic.py``); None: the job's own."""
    measure: bool = False
    """Ask the worker for step and sync times and gradient statistics (elastic jobs)."""
    after: tuple[int, int] | None = None
    """A refill: the ``(job, copy)`` whose task on these GPUs this one starts after, with what
    is left of the round as its deadline (``Assignment.after``)."""

    @property
    def ranks(self) -> list[tuple[str, str]]:
        """One (node, gpu type) per worker process of the gang, node order then type order."""
        return [
            (n, k)
            for n in sorted(self.placement)
            for k in sorted(self.placement[n])
            for _ in range(self.placement[n][k])
        ]

    @property
    def node(self) -> str:
        return self.ranks[0][0]

    @property
    def remote_dir(self) -> str:
        return f"r{self.round:04d}-a{self.attempt}/j{self.job.job_id}-c{self.copy}"


@dataclass(frozen=True)
class CopyOutcome:
    task: CopyTask
    kind: str
    """``ok``, ``timeout``, ``unreachable``, ``worker-error``, ``corrupt-checkpoint``, ``transfer``
    or ``preempted`` (its node left a ``--node-stream`` pool; hadar/runtime/node_stream.py)."""
    steps_done: int = 0
    train_seconds: float = 0.0
    wall_seconds: float = 0.0
    checkpoint: Path | None = None
    sha256: str | None = None
    final_loss: float | None = None
    error: str | None = None
    measured: Mapping[str, Any] | None = None
    """What rank 0's worker measured of an elastic round (its result's ``elastic`` record)."""

    @property
    def ok(self) -> bool:
        return self.kind == "ok"

    @property
    def rate(self) -> float:
        return self.steps_done / self.train_seconds if self.train_seconds > 0 else 0.0

    def written(self) -> tuple[Path, str]:
        """The checkpoint an ``ok`` copy brought back, and its sha256 (run_copy sets both)."""
        if self.checkpoint is None or self.sha256 is None:
            raise ValueError(
                f"job {self.task.job.job_id} copy {self.task.copy}: {self.kind} outcome has no checkpoint"
            )
        return self.checkpoint, self.sha256


def _check_real(folder: Path) -> None:
    """Create ``folder`` (a real path under the run directory) if missing;
    :class:`PathEscapeError` if a component of it is now a link."""
    with real_folder(folder, create=True):
        pass


def run_copy(provider: NodeProvider, task: CopyTask, local_dir: Path) -> CopyOutcome:
    """Execute ``task``; the new checkpoint lands in ``local_dir``. A path that would leave the
    node's working directory (a planted symlink) is not a copy failure: it stops the run, as
    does a link planted in ``local_dir``'s path (a real path under the run directory)."""
    _check_real(local_dir)
    try:
        return _run(provider, task, local_dir)
    except PathEscapeError:
        raise
    except UnreachableNodeError as exc:
        return CopyOutcome(task, "unreachable", error=str(exc))
    except ChecksumMismatchError as exc:
        return CopyOutcome(task, "corrupt-checkpoint", error=str(exc))
    except HadarError as exc:
        return CopyOutcome(task, "transfer", error=str(exc))


def _run(provider: NodeProvider, task: CopyTask, local_dir: Path) -> CopyOutcome:
    spec_local = local_dir / f"j{task.job.job_id}-c{task.copy}-spec.json"
    write_json(spec_local, dict(task.job.spec if task.spec is None else task.spec), nofollow=True)
    rd = task.remote_dir
    ranks = task.ranks
    nodes = sorted({n for n, _ in ranks})
    for node in nodes:
        provider.put(node, spec_local, f"{rd}/spec.json")
        if task.checkpoint_in is not None:
            put_checkpoint(
                provider, node, task.checkpoint_in, task.checkpoint_sha256, f"{rd}/in.pt"
            )
    master = _rendezvous(provider, task) if len(ranks) > 1 else None
    slots = rank_layout(ranks, task.devices)

    def launch(rank: int) -> Any:
        node = ranks[rank][0]
        env = worker_env(slots[rank], len(ranks), master)
        argv = [
            *worker_command(provider, node, task.warm),
            "--spec",
            f"{rd}/spec.json",
            "--steps",
            str(task.steps),
            "--deadline-s",
            f"{task.deadline_s:.3f}",
            "--result",
            f"{rd}/result-{rank}.json",
            "--speed-factor",
            f"{provider.speed_factor(node):g}",
            "--data-stream",
            str(task.data_stream),
            "--threads",
            str(task.threads),
        ]
        if rank == 0:
            argv += ["--checkpoint-out", f"{rd}/out.pt"]
        if task.measure:
            argv.append("--measure")
        if task.checkpoint_in is not None:
            argv += ["--checkpoint-in", f"{rd}/in.pt"]
        return provider.run(node, argv, timeout_s=task.timeout_s, env=env)

    if len(ranks) == 1:
        results = [launch(0)]
    else:
        with ThreadPoolExecutor(max_workers=len(ranks)) as pool:
            results = list(pool.map(launch, range(len(ranks))))
    if any(r.timed_out for r in results):
        return CopyOutcome(
            task,
            "timeout",
            error=f"node {task.node}: no result within {task.timeout_s:.0f} s (killed)",
        )
    if any(not r.ok for r in results):
        bad = next(r for r in results if not r.ok)
        return CopyOutcome(
            task,
            "worker-error",
            error=f"node {task.node}: worker exited {bad.returncode}: {bad.tail(2)}",
        )
    result_local = local_dir / f"j{task.job.job_id}-c{task.copy}-result.json"
    _check_real(local_dir)  # the providers write through paths: re-checked just before
    provider.get(task.node, f"{rd}/result-0.json", result_local)
    result = json.loads(result_local.read_text())
    ckpt_local = local_dir / f"j{task.job.job_id}-c{task.copy}-out.pt"
    sha = provider.get(task.node, f"{rd}/out.pt", ckpt_local, expected_sha256=result.get("sha256"))
    remove_checkpoints(provider, nodes, rd, ["in.pt", "out.pt"])
    return CopyOutcome(
        task,
        "ok",
        steps_done=int(result["steps_done"]),
        train_seconds=float(result["train_seconds"]),
        wall_seconds=float(result.get("wall_seconds") or max(r.seconds for r in results)),
        checkpoint=ckpt_local,
        sha256=sha,
        final_loss=result.get("final_loss"),
        measured=result.get("elastic"),
    )


def remove_checkpoints(
    provider: NodeProvider, nodes: list[str], folder: str, names: list[str]
) -> None:
    """Delete a copy's checkpoints ``names`` in its task ``folder`` on its nodes once fetched, so
    that rounds do not pile them up there (the small spec and result files stay with the work
    directory). The folder is walked without following a link (``nodes.cleanup``: ``rm -f``
    deleted the files a folder swapped for a link led to). Best effort."""
    for node in nodes:
        try:
            provider.run(
                node, [*provider.python(node), "-m", CLEANUP_MODULE, folder, *names], timeout_s=30
            )
        except HadarError:
            continue


def put_checkpoint(
    provider: NodeProvider, node: str, path: Path, sha256: str | None, remote: str
) -> None:
    """Send a consolidated checkpoint; raise ChecksumMismatchError (the worker is then never
    started on it) unless the bytes sent hash to the sha256 the Job Tracker recorded."""
    sent = provider.put(node, path, remote)
    if sha256 is not None and sent != sha256:
        raise ChecksumMismatchError(
            f"node {node}: checkpoint {path} has sha256 {sent[:12]}..., recorded "
            f"{sha256[:12]}...; not used"
        )


def _rendezvous(provider: NodeProvider, task: CopyTask) -> tuple[str, int]:
    """Rendezvous of a multi-process gang at rank 0's node: (MASTER_ADDR, MASTER_PORT)."""
    master = provider.rendezvous_address(task.node)
    if master in ("127.0.0.1", "localhost"):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    else:
        port = random.Random(
            f"{task.round}/{task.attempt}/{task.job.job_id}/{task.copy}"
        ).randrange(29500, 39500)
    return master, port


def evaluate_checkpoint(
    provider: NodeProvider,
    node: str,
    job: Job,
    checkpoint: Path,
    sha256: str | None,
    local_dir: Path,
    timeout_s: float,
    warm: bool = True,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any] | None:
    """Score a job's final model on its held-out split on ``node``; None if that failed."""
    rd = f"eval/j{job.job_id}"
    _check_real(local_dir)
    spec_local = local_dir / f"eval-j{job.job_id}-spec.json"
    write_json(spec_local, dict(job.spec), nofollow=True)
    try:
        provider.put(node, spec_local, f"{rd}/spec.json")
        put_checkpoint(provider, node, checkpoint, sha256, f"{rd}/in.pt")
        res = provider.run(
            node,
            [
                *worker_command(provider, node, warm),
                "--spec",
                f"{rd}/spec.json",
                "--steps",
                "0",
                "--deadline-s",
                f"{timeout_s:.0f}",
                "--checkpoint-in",
                f"{rd}/in.pt",
                "--result",
                f"{rd}/result.json",
                "--checkpoint-out",
                f"{rd}/eval.pt",
                "--eval",
                "--threads",
                "1",
            ],
            timeout_s=timeout_s,
            env=env,
        )
        if not res.ok:
            return None
        out = local_dir / f"eval-j{job.job_id}.json"
        _check_real(local_dir)
        provider.get(node, f"{rd}/result.json", out)
        remove_checkpoints(provider, [node], rd, ["in.pt", "eval.pt"])
        metric: dict[str, Any] | None = json.loads(out.read_text()).get("metric")
        return metric
    except HadarError:
        return None


def stop_warm_servers(provider: NodeProvider, nodes: list[str], zygotes: bool = True) -> None:
    """End the nodes' warm servers and what they run, all nodes at once, each waited for, then
    (``zygotes``) the processes they were forked from (best effort: a node may be gone)."""

    def stop(node: str, where: list[str]) -> None:
        argv = [*provider.python(node), "-m", "nodes.warm", "stop", *where]
        with contextlib.suppress(HadarError):
            provider.run(node, argv, timeout_s=30)

    if nodes:
        with ThreadPoolExecutor(max_workers=min(16, len(nodes))) as pool:
            list(pool.map(lambda node: stop(node, []), nodes))
    if zygotes:
        found: dict[str, str] = {}
        for node in nodes:
            with contextlib.suppress(HadarError):
                zygote = provider.warm_zygote_dir(node)
                if zygote is not None:
                    found.setdefault(zygote, node)
        for zygote, node in found.items():
            stop(node, ["--zygote", zygote])
