"""Summary metrics of a simulation or real run (pure functions of the records)."""

from __future__ import annotations

from dataclasses import asdict

import numpy as np

from hadar.simulator.records import SimulationResult


def summarize(result: SimulationResult) -> dict[str, object]:
    """TTD, JCT statistics, queueing delay, GRU, restarts and decision times.

    * ``ttd_s``: from the first arrival until the last job finishes.
    * ``gru``: busy GPU-seconds / (GPUs x seconds during which unfinished jobs existed).
    * ``gpu_util_gavel``: Gavel's definition, the mean over GPUs of busy time / elapsed time.
    * ``estimated_cells``: the throughput figures that were estimated (not in the measured table).
    """
    jobs = result.jobs
    done = [j for j in jobs if j.finish is not None]
    jct = np.array([j.jct for j in done], dtype=float)
    queueing = np.array([j.queueing_delay for j in jobs if j.queueing_delay is not None], dtype=float)
    first_arrival = min((j.arrival for j in jobs), default=0.0)
    last_finish = max((j.finish for j in done), default=first_arrival)
    ttd = last_finish - first_arrival
    busy = sum(r.busy_gpu_seconds for r in result.rounds)
    available = result.total_gpus * sum(r.active_seconds for r in result.rounds)
    decisions = np.array([r.decision_seconds for r in result.rounds], dtype=float)
    gavel_util = float(busy / (result.total_gpus * ttd)) if ttd > 0 and result.total_gpus else 0.0

    def stat(a: np.ndarray, f) -> float | None:
        return float(f(a)) if a.size else None

    return {
        "policy": result.policy,
        "cluster": result.cluster,
        "jobs": len(jobs),
        "completed": len(done),
        "ttd_s": float(ttd),
        "avg_jct_s": stat(jct, np.mean),
        "median_jct_s": stat(jct, np.median),
        "p99_jct_s": stat(jct, lambda a: np.percentile(a, 99)),
        "avg_queueing_s": stat(queueing, np.mean),
        "gru": float(busy / available) if available > 0 else 0.0,
        "gpu_util_gavel": gavel_util,
        "restarts_per_job": float(np.mean([j.restarts for j in jobs])) if jobs else 0.0,
        "rounds": len(result.rounds),
        "avg_decision_s": stat(decisions, np.mean),
        "median_decision_s": stat(decisions, np.median),
        "max_decision_s": stat(decisions, np.max),
        "estimated_cells": [asdict(c) for c in result.estimated_cells],
    }
