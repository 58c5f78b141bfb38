"""How Hadar's cost grows with jobs, nodes and GPU types: one round, and whole simulations.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_scale.py [--repeat 3] [--quick] [--skip-100k]
        [--skip-sim] [--plot docs/figures/scale.png]

Every measurement runs in its own process, so its peak memory is that process's peak resident
set (``ru_maxrss``: the jobs, the cluster and the decision together). Times are CPU seconds
(``time.process_time``; wall seconds on a shared machine are noisier) and the median over
``--repeat`` decisions, each by a fresh policy. A round is the hardest one: every job queued on
an empty cluster (as at t=0 of the paper's workload). Clusters of N nodes x 8 GPUs cycle over the
first T GPU types of Gavel's table (v100, p100, k80; the table has no other measured types).

Targets (issue 11): a round of 2,048 jobs on sim-60gpu <= 0.10 s, 10,000 jobs on 1,024 x 8 <=
1.0 s, 100,000 jobs on 8,192 x 8 <= 10 s and <= 4 GB; ``hadar simulate`` of philly-480 <= 2 s;
a 10,000-job Poisson trace on 1,024 x 8, whole simulation, <= 10 min.

With ``--plot PATH`` (the docs' figure: ``docs/figures/scale.png``; none by default, so a run
changes no file), a log-log plot shows CPU seconds per round against jobs (1,024 x 8 GPUs),
nodes (10,000 jobs) and GPU types (10,000 jobs, 1,024 nodes), with each sweep's fitted exponent.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TYPES = ("v100", "p100", "k80")
POISSON_JOBS_PER_HOUR = 4096.0
"""Arrival rate of the 10,000-job trace on 8,192 GPUs: the paper-cluster load sweep's 30 jobs/h
on 60 GPUs, scaled by the GPU count (about 4,100 jobs/h)."""


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure_round(jobs: int, nodes: int, types: int, repeat: int) -> dict[str, Any]:
    """One round with ``jobs`` queued on ``nodes`` x 8 GPUs of ``types`` types (``nodes`` 0:
    sim-60gpu), in this process."""
    from bench_hadar_decision import cold_round, jobs_for

    from estimators.throughput import GavelThroughputTable
    from hadar.core.cluster import Cluster, Node
    from hadar.core.cluster_config import load_cluster
    from hadar.scheduler import HadarPolicy

    table = GavelThroughputTable.bundled()
    if nodes == 0:
        cluster = load_cluster("sim-60gpu")
    else:
        cluster = Cluster(
            f"gen-{nodes}x8-{types}t",
            tuple(Node(f"n{i}", {TYPES[i % types]: 8}) for i in range(nodes)),
        )
    ctx = cold_round(cluster, jobs_for(jobs, table), table)
    before = _peak_mb()
    cpu, wall, placed = [], [], 0
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        plan = HadarPolicy().decide(ctx)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
        placed = len(plan.assignments)
    return {
        "kind": "round",
        "jobs": jobs,
        "nodes": nodes,
        "types": types,
        "cpu_s": statistics.median(cpu),
        "wall_s": statistics.median(wall),
        "placed": placed,
        "rss_before_mb": before,
        "peak_mb": _peak_mb(),
    }


def measure_simulation(workload: str) -> dict[str, Any]:
    """A whole ``hadar`` simulation: ``philly-480`` on sim-60gpu, or ``poisson-10000`` on 1,024 x 8."""
    from bench_hadar_decision import big_cluster, jobs_for

    from estimators.throughput import GavelThroughputTable
    from hadar import api
    from hadar.core.cluster import Cluster
    from hadar.core.jobs import Job
    from hadar.experiments.load_sweep import poisson_arrivals

    cluster: str | Cluster
    jobs: str | list[Job]
    if workload == "philly-480":
        cluster, jobs = "sim-60gpu", "philly-480"
    else:
        table = GavelThroughputTable.bundled()
        cluster, jobs = (
            big_cluster(),
            poisson_arrivals(jobs_for(10_000, table), POISSON_JOBS_PER_HOUR, seed=0),
        )
    c0, w0 = time.process_time(), time.perf_counter()
    sim = api.simulate(cluster, jobs, "hadar")
    s = sim.summary
    return {
        "kind": "simulation",
        "workload": workload,
        "cpu_s": time.process_time() - c0,
        "wall_s": time.perf_counter() - w0,
        "rounds": s["rounds"],
        "ttd_h": s["ttd_s"] / 3600,
        "avg_jct_h": s["avg_jct_s"] / 3600,
        "peak_mb": _peak_mb(),
    }


def run_child(args: list[str]) -> dict[str, Any]:
    """One measurement in a fresh process (its own peak memory)."""
    cmd = [sys.executable, __file__, "--child", *args]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT)
    row: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return row


def exponent(xs: list[float], ys: list[float]) -> float:
    """Slope of log(y) against log(x): cost ~ x ** slope."""
    import numpy as np

    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def plot(sweeps: dict[str, list[dict[str, Any]]], path: Path) -> None:
    """CPU seconds (left axis) and peak memory (right axis) per sweep, log-log, with fitted exponents."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    labels = {
        "jobs": "queued jobs (1,024 nodes x 8 GPUs, 3 types)",
        "nodes": "nodes x 8 GPUs (10,000 jobs, 3 types)",
        "types": "GPU types (10,000 jobs, 1,024 nodes x 8)",
    }
    for ax, (name, rows) in zip(axes, sweeps.items(), strict=True):
        xs = [r[name] for r in rows]
        cpu = [r["cpu_s"] for r in rows]
        mem = [r["peak_mb"] for r in rows]
        ax.loglog(
            xs,
            cpu,
            "o-",
            color="tab:blue",
            label=f"CPU s per round (~ {name}^{exponent(xs, cpu):.2f})",
        )
        mem_ax = ax.twinx()
        mem_ax.loglog(
            xs, mem, "s--", color="tab:orange", label=f"peak MB (~ {name}^{exponent(xs, mem):.2f})"
        )
        for a in (ax, mem_ax):
            a.xaxis.set_minor_locator(NullLocator())
        ax.set_xticks(xs, [f"{x:,}" for x in xs], fontsize=8)
        ax.set_xlabel(labels[name])
        ax.set_ylabel("CPU seconds", color="tab:blue")
        mem_ax.set_ylabel("peak resident memory (MB)", color="tab:orange")
        ax.grid(True, which="major", alpha=0.3)
        handles = ax.get_legend_handles_labels()[0] + mem_ax.get_legend_handles_labels()[0]
        ax.legend(handles, [str(h.get_label()) for h in handles], fontsize=8, loc="upper left")
    fig.suptitle(
        "Hadar: one round, every job queued on an empty cluster (median of 3, CPU seconds)"
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--quick", action="store_true", help="smaller sweeps, no 100k round, no whole simulations"
    )
    ap.add_argument("--skip-100k", action="store_true")
    ap.add_argument("--skip-sim", action="store_true", help="skip the whole simulations")
    ap.add_argument(
        "--plot", type=Path, default=None, help="draw the log-log plot there (none by default)"
    )
    ap.add_argument("--child", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        sys.path.insert(0, str(Path(__file__).parent))
        kind, *rest = args.child
        result = measure_round(*map(int, rest)) if kind == "round" else measure_simulation(rest[0])
        print(json.dumps(result))
        return

    def round_(jobs: int, nodes: int, types: int = 3, repeat: int = args.repeat) -> dict[str, Any]:
        row = run_child(["round", str(jobs), str(nodes), str(types), str(repeat)])
        print(
            f"  round: {jobs:>7,} jobs  {nodes or 'sim-60gpu'!s:>9} nodes  {types} types  "
            f"{row['cpu_s']:7.3f} CPU s  {row['wall_s']:7.3f} wall s  peak {row['peak_mb']:7,.0f} MB  "
            f"placed {row['placed']:,}",
            flush=True,
        )
        return row

    quick = args.quick
    print("headline rounds")
    head = [round_(2048, 0), round_(10_000, 1024)]
    if not (quick or args.skip_100k):
        head.append(round_(100_000, 8192, repeat=1))
    print("sweeps")
    sweeps = {
        "jobs": [
            round_(n, 1024)
            for n in ((1250, 2500, 5000) if quick else (1250, 2500, 5000, 10_000, 20_000))
        ],
        "nodes": [
            round_(10_000, n)
            for n in ((128, 256, 512) if quick else (128, 256, 512, 1024, 2048, 4096))
        ],
        "types": [round_(10_000, 1024, t) for t in (1, 2, 3)],
    }
    for name, rows in sweeps.items():
        xs = [r[name] for r in rows]
        print(
            f"  CPU s ~ {name}^{exponent(xs, [r['cpu_s'] for r in rows]):.2f}, "
            f"peak MB ~ {name}^{exponent(xs, [r['peak_mb'] for r in rows]):.2f}"
        )
    if not (quick or args.skip_sim):
        print("whole simulations")
        for workload in ("philly-480", "poisson-10000"):
            s = run_child(["simulation", workload])
            print(
                f"  {workload}: {s['rounds']} rounds  {s['cpu_s']:.1f} CPU s  {s['wall_s']:.1f} wall s  "
                f"peak {s['peak_mb']:,.0f} MB  TTD {s['ttd_h']:.2f} h  avg JCT {s['avg_jct_h']:.2f} h",
                flush=True,
            )
    if args.plot is None:
        return
    try:
        plot(sweeps, args.plot)
        print(f"plot: {args.plot}")
    except ImportError:
        print("plot skipped: matplotlib is not installed (pip install 'hadar-scheduler[plots]')")


if __name__ == "__main__":
    main()
