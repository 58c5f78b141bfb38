"""Average JCT against the input job rate: the field's standard continuous-arrival evaluation
(Gavel's Fig. "average JCT vs input job rate").

For each rate (jobs/hour) the same jobs, sampled by the paper's Philly generator (seeded), arrive
as a Poisson process in the trace's submission order: inter-arrival gaps are one seeded stream of
unit exponentials scaled by ``3600 / rate``, so every rate replays the same jobs and the same
relative gaps (common random numbers: curves differ by the rate, not by sampling noise). Each
(policy, rate, seed) cell is one simulation; JCT statistics are taken over a steady-state window
of jobs (by arrival order, after a warm-up and before the drain at the end of the trace).

A policy **saturates** at a rate when its backlog (arrived, unfinished jobs) grows across the
window: at the last window arrival it exceeds the backlog at the first window arrival by more than
``SATURATION_GROWTH`` of the window's jobs, i.e. jobs arrive faster than the policy completes
them and the mean JCT only depends on how long the trace is. A policy *sustains* a rate when it
does not saturate there nor at any lower rate swept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from hadar.core.defaults import SIMULATED
from hadar.core.io import write_frame, write_json
from hadar.core.jobs import Job
from hadar.simulator.records import JobRecord

SATURATION_GROWTH = 0.2
"""Backlog growth across the window, as a fraction of the window's jobs, that marks saturation."""

DEFAULT_RATES = (8.0, 16.0, 24.0, 32.0, 40.0, 48.0, 56.0, 64.0)
DEFAULT_JOBS = 600
DEFAULT_WINDOW = (100, 500)


@dataclass(frozen=True)
class SweepCell:
    """One simulation of the sweep (plain, picklable values)."""

    policy: str
    rate: float
    seed: int
    cluster: str
    num_jobs: int
    window: tuple[int, int]
    round_s: float = SIMULATED.round_s
    restart_penalty_s: float = SIMULATED.restart_penalty_s
    throughputs: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    gavel_compatible: bool = False
    """Run as Gavel's own simulator does (``hadar.simulator.gavel_mode``; the restart penalty is
    then 0)."""


def poisson_arrivals(jobs: Sequence[Job], rate_per_hour: float, seed: int) -> list[Job]:
    """``jobs`` (in order) arriving as a Poisson process of ``rate_per_hour``, the first at 0."""
    if not rate_per_hour > 0:
        raise ValueError("rate must be positive")
    gaps = np.random.default_rng([seed, 0x5EED]).exponential(1.0, size=len(jobs))
    times = np.concatenate([[0.0], np.cumsum(gaps[1:])]) * 3600.0 / rate_per_hour
    return [replace(j, arrival=float(t)) for j, t in zip(jobs, times, strict=True)]


def window_stats(records: Sequence[JobRecord], window: tuple[int, int]) -> dict[str, Any]:
    """JCT and queueing statistics over the jobs with arrival rank in ``[start, end)``, and the
    backlog growth that decides saturation."""
    ordered = sorted(records, key=lambda j: (j.arrival, j.job_id))
    start, end = window
    inside = ordered[start:end]
    jct = np.array([j.jct for j in inside if j.jct is not None], dtype=float)
    queueing = np.array(
        [j.queueing_delay for j in inside if j.queueing_delay is not None], dtype=float
    )
    t0, t1 = inside[0].arrival, inside[-1].arrival

    def backlog(t: float) -> int:
        return sum(1 for j in ordered if j.arrival <= t and (j.finish is None or j.finish > t))

    growth = (backlog(t1) - backlog(t0)) / max(1, len(inside))
    return {
        "window_jobs": len(inside),
        "window_completed": int(jct.size),
        "avg_jct_s": float(jct.mean()) if jct.size else None,
        "median_jct_s": float(np.median(jct)) if jct.size else None,
        "p99_jct_s": float(np.percentile(jct, 99)) if jct.size else None,
        "max_jct_s": float(jct.max()) if jct.size else None,
        "avg_queueing_s": float(queueing.mean()) if queueing.size else None,
        "backlog_growth": float(growth),
        "saturated": bool(growth > SATURATION_GROWTH),
    }


def run_cell(cell: SweepCell) -> dict[str, Any]:
    """Simulate one cell; its row of results (window statistics plus the whole run's summary)."""
    import time

    from hadar.clusters import load_cluster
    from hadar.policy_options import policy_with_options
    from hadar.scenario import load_table, throughput_for
    from hadar.simulator import SimConfig, gavel_mode, simulate
    from hadar.simulator.metrics import summarize
    from hadar.workloads.philly import PhillyOptions, generate

    table = load_table(cell.throughputs)
    cluster = load_cluster(cell.cluster)
    jobs = poisson_arrivals(
        generate(table, PhillyOptions(num_jobs=cell.num_jobs, seed=cell.seed)), cell.rate, cell.seed
    )
    model = throughput_for(jobs, cluster, table)
    if cell.gavel_compatible:
        policy, config, model = gavel_mode.setup(cell.policy, model, cell.round_s, cell.options)
    else:
        policy = policy_with_options(cell.policy, cell.options)
        config = SimConfig(round_s=cell.round_s, restart_penalty_s=cell.restart_penalty_s)
    t0 = time.perf_counter()
    result = simulate(cluster, jobs, policy, model, config)
    wall = time.perf_counter() - t0
    summary = summarize(result)
    row = {
        "policy": cell.policy,
        "rate": cell.rate,
        "seed": cell.seed,
        "jobs": cell.num_jobs,
        "window_start": cell.window[0],
        "window_end": cell.window[1],
        **window_stats(result.jobs, cell.window),
    }
    for key in ("ttd_s", "work_efficiency", "rho_mean", "rho_max", "restarts_per_job"):
        row[key] = summary[key]
    for key in ("avg_jct_s", "p99_jct_s", "max_jct_s"):  # every job, warm-up and drain included
        row[f"all_{key}"] = summary[key]
    row["wall_s"] = round(wall, 3)
    return row


def sustained_rate(rows: Sequence[Mapping[str, Any]], policy: str) -> float | None:
    """The highest swept rate the policy sustains (None when it saturates at the lowest)."""
    best = None
    for r in sorted((r for r in rows if r["policy"] == policy), key=lambda r: r["rate"]):
        if r["saturated"]:
            break
        best = r["rate"]
    return best


def saturation_rate(rows: Sequence[Mapping[str, Any]], policy: str) -> float | None:
    """The lowest swept rate at which the policy saturates (None when it sustains them all)."""
    sat = [r["rate"] for r in rows if r["policy"] == policy and r["saturated"]]
    return min(sat) if sat else None


def cells(
    policies: Sequence[str], rates: Sequence[float], seeds: Sequence[int], **common: Any
) -> list[SweepCell]:
    """Every (policy, rate, seed) cell, rates ascending within each policy."""
    return [
        SweepCell(policy=p, rate=r, seed=s, **common)
        for p in policies
        for s in seeds
        for r in sorted(rates)
    ]


def as_dict(cell: SweepCell) -> dict[str, Any]:
    return {**asdict(cell), "options": dict(cell.options)}


TABLE_FILES = ("load_sweep.csv", "load_sweep.json")
"""What :func:`write_outputs` writes."""
FIGURE = "load_sweep.png"
"""The chart of average JCT against the rate (:func:`hadar.plots.load_sweep_chart`)."""


def result_names(figure: bool) -> list[str]:
    """Every file one ``hadar experiment load-sweep`` writes: the tables, and the chart when
    ``figure``. They are replaced together (:func:`hadar.core.io.replaced_together`)."""
    return [*TABLE_FILES, *([FIGURE] if figure else [])]


def write_outputs(
    out: Path, rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]
) -> list[Path]:
    """``load_sweep.csv`` (one row per cell) and ``load_sweep.json`` (meta + rows), atomically."""
    import pandas as pd

    csv_name, json_name = TABLE_FILES
    csv_path = write_frame(out / csv_name, pd.DataFrame(list(rows)))
    json_path = write_json(out / json_name, {**meta, "rows": list(rows)})
    return [csv_path, json_path]


SWEEP_TABLES = (
    ("avg_jct_s", "average JCT over the window (h)", 3600.0),
    ("p99_jct_s", "p99 JCT over the window (h)", 3600.0),
    ("max_jct_s", "max JCT over the window (h)", 3600.0),
    ("rho_max", "max finish-time fairness rho (whole run)", 1.0),
)
"""The tables :func:`print_table` prints: row key, title, unit divisor."""


def print_table(
    console: Any,
    rows: Sequence[Mapping[str, Any]],
    policies: Sequence[str],
    rates: Sequence[float],
    saturation: Mapping[str, float | None],
) -> None:
    """Per policy and rate, mean over seeds, one table each: average, p99 and max JCT (hours)
    over the window, and the run's max rho; * = saturated."""
    from rich.table import Table

    for key, title, unit in SWEEP_TABLES:
        table = Table(title=f"{title}; * = saturated (backlog grows)")
        table.add_column("policy")
        for r in sorted(rates):
            table.add_column(f"{r:g}/h", justify="right")
        table.add_column("saturates at", justify="right")
        for p in policies:
            cells = []
            for r in sorted(rates):
                sel = [
                    x
                    for x in rows
                    if x["policy"] == p and x["rate"] == r and x.get(key) is not None
                ]
                if not sel:
                    cells.append("-")
                    continue
                v = float(np.mean([x[key] for x in sel])) / unit
                cells.append(f"{v:.2f}{'*' if any(x['saturated'] for x in sel) else ''}")
            s = saturation.get(p)
            table.add_row(p, *cells, "-" if s is None else f"{s:g}/h")
        console.print(table)
