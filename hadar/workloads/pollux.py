"""Pollux's evaluation workloads (``pollux-N``, N = 1..8, at relative load 0.5, 1, 1.5 or 2) and
workload files in their schema, as elastic jobs.

Each row ``name,time,application,num_replicas,batch_size`` becomes a job of type
``application`` arriving at ``time``: a rigid policy gives it ``num_replicas`` GPUs and the total
batch ``batch_size`` (the paper's TunedJobs); an elastic policy may give it 1 to
``max_gpus`` GPUs and any total batch within the measured range. Its size is its completion
target in samples at the application's initial batch size (``goodput.traces``), and a
re-allocation costs it its application's restart delay (:data:`RESTART_S`).
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from types import MappingProxyType

from goodput.applications import APPLICATIONS
from goodput.traces import AppTrace, bundled_trace
from hadar.core.csv_input import read_csv_dicts
from hadar.core.errors import InputError, shorten
from hadar.core.jobs import Job
from hadar.core.validation import MAX_SECONDS, read_text

POLLUX_RE = re.compile(r"pollux-(\d+)(?:-load-(\d+(?:\.\d+)?))?")
"""``pollux-N`` (relative load 1) or ``pollux-N-load-L`` (what ``--load L`` selects)."""

LOADS = {0.5: "load_0_5", 1.0: "load_1_0", 1.5: "load_1_5", 2.0: "load_2_0"}
"""Relative job loads of the bundled workloads and their folders."""

NUM_WORKLOADS = 8

RESTART_S = dict.fromkeys(APPLICATIONS, 30.0)
"""Re-allocation (checkpoint-restart) delay per application, in seconds. Pollux measured 15-120 s
by model on its testbed but publishes no per-model figure; its simulator charges 30 s to every
job (Pollux §5.3), and so does this table. A workload file's ``restart_s`` column overrides it."""

PINNED_APPLICATIONS = frozenset({"ncf"})
"""Applications the official simulator pins under Pollux: each such job runs on one GPU at its
largest batch, never re-scaled (the artifact's ``simulator.py`` sets NCF's target batch to
32,768 and ``max_replicas`` to 1). Other policies run them as the workload says.
``--policy-opt pollux:pin=false`` adapts them like every other application."""

MAX_ELASTIC_GPUS = 64
"""The most GPUs an elastic job may use (the official simulator's cap: 64)."""

COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")
OPTIONAL_COLUMNS = ("min_gpus", "max_gpus", "restart_s")


def workload_at_load(name: str, load: float) -> str:
    """The workload name ``--load`` selects: ``pollux-N`` at relative load ``load``."""
    m = POLLUX_RE.fullmatch(name)
    if m is None or m.group(2) is not None:
        raise InputError(f"--load: applies to a workload pollux-N only (got --workload {name!r})")
    if load not in LOADS:
        raise InputError(
            f"--load: must be one of {', '.join(f'{v:g}' for v in LOADS)} (got {load:g})"
        )
    return name if load == 1.0 else f"{name}-load-{load:g}"


def pollux_jobs(name: str) -> list[Job]:
    """The jobs of a bundled workload named ``pollux-N`` or ``pollux-N-load-L``."""
    m = POLLUX_RE.fullmatch(name)
    if m is None:
        raise InputError(f"--workload: {name!r} is not pollux-N or pollux-N-load-L")
    number = int(m.group(1))
    if not 1 <= number <= NUM_WORKLOADS:
        raise InputError(f"--workload: Pollux workloads are pollux-1..pollux-{NUM_WORKLOADS}")
    load = float(m.group(2) or 1.0)
    if load not in LOADS:
        raise InputError(
            f"--workload: load must be one of {', '.join(f'{v:g}' for v in LOADS)} (got {load:g})"
        )
    folder = resources.files("hadar.workloads").joinpath(f"data/pollux/{LOADS[load]}")
    text = folder.joinpath(f"workload-{number}.csv").read_text()
    return jobs_from_pollux_csv(text, source=name)


def load_pollux_file(path: Path) -> list[Job]:
    """A workload file in Pollux's schema; errors name the file, row and field."""
    return jobs_from_pollux_csv(read_text(path, "workload file"), source=str(path))


def jobs_from_pollux_csv(text: str, source: str) -> list[Job]:
    """Jobs from Pollux's workload CSV (optional extra columns ``min_gpus``, ``max_gpus``,
    ``restart_s``); the job id is the row number."""
    header, records = read_csv_dicts(text, source)
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise InputError(f"{source}: header: missing column(s) {', '.join(missing)}")
    unknown = [c for c in header if c not in COLUMNS and c not in OPTIONAL_COLUMNS]
    if unknown:  # a misspelt optional column would otherwise be ignored without a word
        raise InputError(
            f"{source}: header: unknown column {shorten(unknown[0])!r} "
            f"(known: {', '.join((*COLUMNS, *OPTIONAL_COLUMNS))})"
        )
    jobs = [_job(i, row, f"{source}: row[{i}]") for i, (_, row) in enumerate(records)]
    if not jobs:
        raise InputError(f"{source}: no jobs")
    return jobs


def _number(
    row: dict[str, str], key: str, where: str, integer: bool, lo: float, hi: float
) -> float:
    raw = (row.get(key) or "").strip()
    try:
        value = float(raw)
    except ValueError:
        raise InputError(f"{where}.{key}: not a number ({shorten(raw)!r})") from None
    if not lo <= value <= hi or (integer and value != int(value)):
        kind = "an integer" if integer else "a number"
        raise InputError(
            f"{where}.{key}: must be {kind} in [{lo:g}, {hi:g}] (got {shorten(raw)!r})"
        )
    return value


def _job(index: int, row: dict[str, str], where: str) -> Job:
    app = (row.get("application") or "").strip()
    if app not in APPLICATIONS:
        raise InputError(
            f"{where}.application: unknown application {shorten(app)!r} "
            f"(known: {', '.join(APPLICATIONS)})"
        )
    trace = bundled_trace(app)
    arrival = _number(row, "time", where, False, 0, MAX_SECONDS)
    gpus = int(_number(row, "num_replicas", where, True, 1, MAX_ELASTIC_GPUS))
    lo_b, hi_b = trace.init_batch_size, trace.max_batch_size
    batch = int(_number(row, "batch_size", where, True, 1, 1e9))
    if not lo_b <= batch <= hi_b:
        raise InputError(
            f"{where}.batch_size: {batch} is outside {app}'s measured batch sizes [{lo_b}, {hi_b}]"
        )
    min_gpus = _optional_int(row, "min_gpus", where, 1)
    max_gpus = _optional_int(row, "max_gpus", where, max(gpus, _max_gpus(trace)))
    if min_gpus > max_gpus:
        raise InputError(f"{where}.min_gpus: {min_gpus} exceeds max_gpus {max_gpus}")
    if not min_gpus <= gpus <= max_gpus:
        raise InputError(
            f"{where}.num_replicas: {gpus} is outside [min_gpus, max_gpus] = [{min_gpus}, {max_gpus}]"
        )
    restart = RESTART_S[app]
    if (row.get("restart_s") or "").strip():
        restart = _number(row, "restart_s", where, False, 0, 86400)
    return Job(
        job_id=index,
        job_type=app,
        num_gpus=gpus,
        total_steps=trace.target_samples,
        arrival=arrival,
        spec=MappingProxyType(
            {"application": app, "batch_size": batch, "name": (row.get("name") or "").strip()}
        ),
        min_gpus=min_gpus,
        max_gpus=max_gpus,
        batch_range=(lo_b, hi_b),
        restart_s=restart,
    )


def _optional_int(row: dict[str, str], key: str, where: str, default: int) -> int:
    if not (row.get(key) or "").strip():
        return default
    return int(_number(row, key, where, True, 1, MAX_ELASTIC_GPUS))


def _max_gpus(trace: AppTrace) -> int:
    """The most GPUs that still give every GPU the smallest measured local batch at the largest
    measured total batch (the official simulator's bound), at most :data:`MAX_ELASTIC_GPUS`."""
    return max(1, min(MAX_ELASTIC_GPUS, trace.max_batch_size // trace.min_local_bsz))
