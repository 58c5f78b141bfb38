"""Summary metrics of a simulation or real run (pure functions of the records)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from hadar.outputs_schema import completion_metrics, decision_metrics, utilisation
from hadar.reference_rates import fair_share_jct
from hadar.simulator.records import JobRecord, PlacementRecord, SimulationResult


def summarize(result: SimulationResult) -> dict[str, object]:
    """TTD, JCT statistics, queueing delay, GRU, work efficiency, finish-time fairness, restarts
    and decision times.

    * ``ttd_s``: from the first arrival until the last job finishes.
    * ``gru``: busy GPU-seconds / (GPUs x seconds during which unfinished jobs existed).
    * ``cru``: busy node-seconds / (nodes x those seconds), see :mod:`hadar.outputs_schema`.
    * ``gpu_util_gavel``: Gavel's definition, the mean over GPUs of busy time / elapsed time.
    * ``avg_queueing_s``: mean of (first start - arrival) over the jobs that started.
    * ``work_efficiency``: GPU-seconds the jobs need at their best rates on this cluster over the
      busy GPU-seconds they used (1.0 = every job always on its fastest placement, no restarts).
    * ``rho_*``: finish-time fairness (Themis), see :func:`finish_time_fairness`.
    * ``estimated_cells``: the throughput figures that were estimated (not in the measured table).
    * ``gpu_hours``, ``avg_gpus_per_job``, ``avg_batch_per_job``: the Pollux paper's measures,
      see :func:`allocation_metrics`.
    * ``time_limited_rounds``: rounds whose decision hit a solver's time limit (the policy's
      ``info`` says ``time_limit_hit``; it then kept the best feasible decision in hand).
    """
    jobs = result.jobs
    completion = completion_metrics(
        [j.arrival for j in jobs], [j.start for j in jobs], [j.finish for j in jobs]
    )
    busy = sum(r.busy_gpu_seconds for r in result.rounds)
    active = sum(r.active_seconds for r in result.rounds)
    busy_nodes = sum(r.busy_node_seconds for r in result.rounds)
    ttd = completion["ttd_s"]
    gavel_util = float(busy / (result.total_gpus * ttd)) if ttd > 0 and result.total_gpus else 0.0
    need = sum(j.num_gpus * j.total_steps / j.best_rate for j in jobs if j.best_rate)
    rho = finish_time_fairness(jobs, result.total_gpus)

    def stat(a: np.ndarray, f: Callable[[np.ndarray], Any]) -> float | None:
        return float(f(a)) if a.size else None

    return {
        "policy": result.policy,
        "cluster": result.cluster,
        **completion,
        "gru": utilisation(busy, result.total_gpus * active),
        "cru": utilisation(busy_nodes, result.total_nodes * active),
        "work_efficiency": float(need / busy) if busy > 0 else None,
        "rho_mean": stat(rho, np.mean),
        "rho_median": stat(rho, np.median),
        "rho_max": stat(rho, np.max),
        "rho_above_1": float(np.mean(rho > 1.0)) if rho.size else None,
        "gpu_util_gavel": gavel_util,
        "restarts_per_job": float(np.mean([j.restarts for j in jobs])) if jobs else 0.0,
        **allocation_metrics(busy, result.placements),
        "rounds": len(result.rounds),
        **decision_metrics([r.decision_seconds for r in result.rounds]),
        "time_limited_rounds": sum(1 for r in result.rounds if r.info.get("time_limit_hit")),
        "estimated_cells": [asdict(c) for c in result.estimated_cells],
    }


def allocation_metrics(
    busy_gpu_seconds: float, placements: Sequence[PlacementRecord]
) -> dict[str, float | None]:
    """The Pollux paper's resource measures (its Table 2):

    * ``gpu_hours``: busy GPU-hours (every GPU a job held, for as long as it held it);
    * ``avg_gpus_per_job``: GPUs per running job, the mean over (round, running job) pairs (a
      HadarE job's copies together);
    * ``avg_batch_per_job``: total batch size per running job the same way (its copies' batches
      summed), over the pairs whose runs have a batch size (elastic jobs; None when none has)."""
    gpus: dict[tuple[int, int], int] = {}
    batch: dict[tuple[int, int], int] = {}
    seen: set[tuple[int, int, int]] = set()
    for r in placements:
        run = (r.round_index, r.job_id, r.copy)
        if run in seen:  # a run's rows (one per node and type) repeat its GPUs and batch
            continue
        seen.add(run)
        key = (r.round_index, r.job_id)
        gpus[key] = gpus.get(key, 0) + r.gpus
        if r.batch_size is not None:
            batch[key] = batch.get(key, 0) + r.batch_size
    return {
        "gpu_hours": busy_gpu_seconds / 3600.0,
        "avg_gpus_per_job": float(np.mean(list(gpus.values()))) if gpus else None,
        "avg_batch_per_job": float(np.mean(list(batch.values()))) if batch else None,
    }


def finish_time_fairness(jobs: Sequence[JobRecord], total_gpus: int) -> np.ndarray:
    """Themis's rho per finished job: its JCT over its JCT with a 1/n share of the cluster.

    ``n`` is the time-averaged number of unfinished arrived jobs (itself included) over the job's
    lifetime [arrival, finish]; a 1/n share is ``G/n`` GPUs split over the types by GPU count, on
    which a gang of W runs at its equal-share rate for a fraction ``min(1, G / (n W))`` of the time.
    rho > 1: the job finished later than it would have with its fair share."""
    done = [(j, j.finish) for j in jobs if j.finish is not None]
    if not done or total_gpus <= 0:
        return np.zeros(0)
    events = sorted([(j.arrival, 1) for j, _ in done] + [(finish, -1) for _, finish in done])
    times = np.array([t for t, _ in events], dtype=float)
    active = np.cumsum([d for _, d in events])
    # integral of the active count up to each event time
    area = np.concatenate([[0.0], np.cumsum(active[:-1] * np.diff(times))])

    def integral(t: float) -> float:
        i = int(np.searchsorted(times, t, side="right")) - 1
        return float(area[i] + active[i] * (t - times[i])) if i >= 0 else 0.0

    out = []
    for j, finish in done:
        jct = finish - j.arrival
        if jct <= 0 or not j.equal_share_rate:
            continue
        n = max(1.0, (integral(finish) - integral(j.arrival)) / jct)
        fair = fair_share_jct(j.total_steps, j.equal_share_rate, j.num_gpus, total_gpus, n)
        out.append(jct / fair)
    return np.array(out, dtype=float)


def comparison_rows(
    summaries: Sequence[dict[str, Any]], reference: str, keys: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """One row per summary (policy): the summary plus ``<key>_ratio`` = value / the reference
    policy's value for each of ``keys`` (default: every numeric metric); None where either
    value is missing or the reference's is 0."""
    ref = next(s for s in summaries if s["policy"] == reference)
    if keys is None:
        keys = [
            k
            for k, v in ref.items()
            if isinstance(v, (int, float, np.number)) and not isinstance(v, bool)
        ]
    rows = []
    for s in summaries:
        row = dict(s)
        for key in keys:
            v, r = s.get(key), ref.get(key)
            row[f"{key}_ratio"] = (v / r) if (v is not None and r) else None
        rows.append(row)
    return rows
