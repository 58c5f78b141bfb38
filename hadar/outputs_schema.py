"""The one output schema of a run, simulated or real (``docs/outputs.md``): the column names both
drivers write first in ``jobs.csv`` and ``rounds.csv``, and the summary metrics both compute the
same way. A driver may append columns and keys of its own after these, never rename them.

Utilisation has two definitions, both in the paper and both in every summary:

* ``gru`` (GPU resource utilisation): busy GPU-seconds / (GPUs x active seconds);
* ``cru`` (cluster resource utilisation): busy node-seconds / (nodes x active seconds), a node
  being busy while at least one job runs on any of its GPUs.

They are equal on clusters with one GPU per node (the paper's physical testbeds) and differ when
a node's GPUs are partly used."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

RUN_FIGURES = ("completion.png", "occupancy.png", "utilisation.png")
"""The figures ``hadar simulate --figures`` draws from a run's files (:mod:`hadar.plots.simulation`)."""

JOB_COLUMNS = [
    "id",
    "type",
    "gpus",
    "arrival",
    "start",
    "finish",
    "jct",
    "queueing_delay",
    "restarts",
]
"""``jobs.csv``'s first columns: times in seconds from the run's start; ``jct`` = finish -
arrival, ``queueing_delay`` = first start - arrival; empty when the job never started/finished."""

ROUND_COLUMNS = [
    "round",
    "time",
    "duration",
    "busy_gpus",
    "busy_gpu_seconds",
    "busy_nodes",
    "busy_node_seconds",
    "running_jobs",
    "queued_jobs",
    "decision_seconds",
]
"""``rounds.csv``'s first columns: one row per recorded round."""

SUMMARY_KEYS = [
    "policy",
    "cluster",
    "jobs",
    "completed",
    "ttd_s",
    "avg_jct_s",
    "median_jct_s",
    "p99_jct_s",
    "max_jct_s",
    "avg_queueing_s",
    "gru",
    "cru",
    "restarts_per_job",
    "rounds",
    "avg_decision_s",
    "median_decision_s",
    "max_decision_s",
    "estimated_cells",
]
"""Keys every ``summary.json`` has, simulated or real. A simulation adds the metrics that need
the throughput model (``work_efficiency``, ``rho_*``, ``gpu_util_gavel``) and its ``config``; a
real run adds its set-up, failures, overheads and each job's held-out quality."""


def _stat(values: np.ndarray, f: Callable[[np.ndarray], Any]) -> float | None:
    return float(f(values)) if values.size else None


def completion_metrics(
    arrivals: Sequence[float],
    starts: Sequence[float | None],
    finishes: Sequence[float | None],
) -> dict[str, Any]:
    """``jobs``, ``completed``, ``ttd_s`` (first arrival to last finish), ``avg_jct_s``,
    ``median_jct_s``, ``p99_jct_s``, ``max_jct_s`` (finish - arrival, finished jobs) and ``avg_queueing_s``
    (first start - arrival, started jobs); one entry per job in each sequence."""
    jct = np.array(
        [f - a for a, f in zip(arrivals, finishes, strict=True) if f is not None], dtype=float
    )
    queueing = np.array(
        [s - a for a, s in zip(arrivals, starts, strict=True) if s is not None], dtype=float
    )
    first_arrival = min(arrivals, default=0.0)
    last_finish = max((f for f in finishes if f is not None), default=first_arrival)
    return {
        "jobs": len(arrivals),
        "completed": int(jct.size),
        "ttd_s": float(last_finish - first_arrival),
        "avg_jct_s": _stat(jct, np.mean),
        "median_jct_s": _stat(jct, np.median),
        "p99_jct_s": _stat(jct, lambda a: np.percentile(a, 99)),
        "max_jct_s": _stat(jct, np.max),
        "avg_queueing_s": _stat(queueing, np.mean),
    }


def utilisation(busy: float, available: float) -> float:
    """``busy / available`` (``gru`` from GPU-seconds, ``cru`` from node-seconds), 0 when nothing
    was available."""
    return float(busy / available) if available > 0 else 0.0


def decision_metrics(decision_seconds: Sequence[float]) -> dict[str, float | None]:
    """``avg_decision_s``, ``median_decision_s``, ``max_decision_s``: wall time of the policy's
    decisions, one entry per round."""
    d = np.array(decision_seconds, dtype=float)
    return {
        "avg_decision_s": _stat(d, np.mean),
        "median_decision_s": _stat(d, np.median),
        "max_decision_s": _stat(d, np.max),
    }
