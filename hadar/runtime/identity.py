"""What makes a run the same run: digests of its inputs, recorded in ``run.json`` and checked by
``hadar run --resume``, and the comparison of the Job Tracker's jobs with the workload's.

A resume that trains a different workload (or the same one at another size, under another
policy) would mix two runs' state: copies fail every round against checkpoints of other models.
The workload, size and policy (with its options) are therefore fixed for a run. The cluster file
may change (nodes join and leave; the coordinator records each change it sees), but a change
made while no coordinator was running is refused unless the user says ``--force``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from hadar.core.cluster_config import resolve_cluster_path
from hadar.core.errors import InputError
from hadar.core.jobs import Job
from hadar.workloads import is_builtin


class RunIdentity(BaseModel):
    """Digests of a run's inputs (``run.json``'s ``identity``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cluster_sha256: str
    """Of the cluster file's bytes."""
    workload_sha256: str
    """Of the workload file's bytes, or of a built-in workload's name and seed."""
    size: str
    policy: str
    policy_options: dict[str, str]
    """Every knob of the policy's config (``--policy-opt`` pairs applied, defaults included) and
    the runtime knobs (restart penalty, aggregation overhead)."""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def workload_digest(workload: str, seed: int) -> str:
    """A job file by its contents (wherever it lives), a built-in workload by name and seed."""
    if is_builtin(workload):
        return sha256_bytes(json.dumps({"builtin": workload, "seed": seed}).encode())
    return sha256_bytes(b"file\0" + _read(Path(workload), "workload"))


def cluster_digest(cluster: str) -> str:
    return sha256_bytes(_read(resolve_cluster_path(cluster), "cluster"))


def _read(path: Path, what: str) -> bytes:
    if not path.is_file():
        raise InputError(f"{path}: {what} file not found")
    return path.read_bytes()


def run_identity(
    cluster: str,
    workload: str,
    seed: int,
    size: str,
    policy: str,
    policy_options: Mapping[str, str],
) -> RunIdentity:
    """The identity of a run with these inputs (the cluster and workload files must exist)."""
    return RunIdentity(
        cluster_sha256=cluster_digest(cluster),
        workload_sha256=workload_digest(workload, seed),
        size=size,
        policy=policy,
        policy_options=dict(policy_options),
    )


def check_same_run(
    recorded: RunIdentity,
    now: RunIdentity,
    source: str,
    *,
    cluster_file: str,
    workload: str,
    force: bool,
    defaults: Mapping[str, str] | None = None,
) -> None:
    """Refuse (one line naming what differs) a resume whose inputs are not the run's. Only a
    changed cluster file may be accepted, with ``force``. ``defaults`` are the policy's knobs at
    their defaults: a knob the recorded identity lacks was added to the policy after the run
    started, which then ran as its default does."""

    def short(digest: str) -> str:
        return digest[:12]

    new_run = "start a new run with --out instead"
    if recorded.workload_sha256 != now.workload_sha256:
        raise InputError(
            f"{source}: workload differs from the one this run started with (digest "
            f"{short(recorded.workload_sha256)}, now {short(now.workload_sha256)} for "
            f"{workload}); {new_run}"
        )
    for field in ("size", "policy"):
        was, is_ = getattr(recorded, field), getattr(now, field)
        if was != is_:
            raise InputError(
                f"{source}: {field} differs from the run's ({was} at the start, now {is_}); {new_run}"
            )
    at_start = {**(defaults or {}), **recorded.policy_options}
    changed = sorted(
        k for k in {*at_start, *now.policy_options} if at_start.get(k) != now.policy_options.get(k)
    )
    if changed:
        was = " ".join(f"{k}={at_start.get(k, '(none)')}" for k in changed)
        is_ = " ".join(f"{k}={now.policy_options.get(k, '(none)')}" for k in changed)
        raise InputError(
            f"{source}: policy options differ from the run's ({was} at the start, now {is_}); {new_run}"
        )
    if recorded.cluster_sha256 != now.cluster_sha256 and not force:
        raise InputError(
            f"{source}: cluster file {cluster_file} changed since the run last used it (digest "
            f"{short(recorded.cluster_sha256)}, now {short(now.cluster_sha256)}); pass --force "
            f"to resume on the changed cluster"
        )


def defaults_changed_since(
    recorded: RunIdentity, defaults: Mapping[str, str], given: Mapping[str, str]
) -> dict[str, str]:
    """The knobs the run never set whose default has changed since it started, as the
    ``--policy-opt`` pairs (``{"elastic_utility": "None"}``) that keep the values it ran with.
    ``defaults``: every knob at today's defaults (:meth:`RunConfig.all_policy_options` with no
    options); ``given``: the options the run was started with. A knob named ``hadar.X`` (HadarE's
    Hadar decision) is the option ``X``."""
    out: dict[str, str] = {}
    for key, was in recorded.policy_options.items():
        option = key.rpartition(".")[2]
        if option in given or key not in defaults or defaults[key] == was:
            continue
        out[option] = was
    return out


def check_tracker_jobs(
    registered: Iterable[tuple[int, int, str | None, str | None]],
    jobs: Iterable[Job],
    source: str,
    workload: str,
) -> None:
    """Every job the tracker holds ``(job_id, target_steps, model, size)`` must be the
    workload's job of that id, with the same steps, model and size."""
    want = {
        j.job_id: (int(j.total_steps), str(j.spec.get("model", "")).upper(), j.spec.get("size"))
        for j in jobs
    }
    for job_id, steps, model, size in sorted(registered):
        have = (steps, (model or "").upper(), size)
        if job_id not in want:
            raise InputError(
                f"{source}: job {job_id} is in the tracker but not in workload {workload}: "
                f"not the workload this run started with"
            )
        if have != want[job_id]:
            w = want[job_id]
            raise InputError(
                f"{source}: job {job_id} is {have[1]}/{have[2]} with {have[0]} steps in the tracker "
                f"but {w[1]}/{w[2]} with {w[0]} steps in workload {workload}: not the workload "
                f"this run started with"
            )
