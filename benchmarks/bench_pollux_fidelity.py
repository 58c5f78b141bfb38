"""Pollux's fidelity on its own workloads (issue 24): the paper's measures per policy.

Runs each policy on ``pollux-N`` (``--load`` 0.5/1/1.5/2 selects ``pollux-N-load-L``) on
``pollux-64t4`` with 60 s rounds (Pollux's scheduling interval) and prints a Markdown table:
average and p99 JCT, makespan, GPU-hours, and the average GPUs and total batch size per running
job and round. Reference: the official Pollux simulator's average JCT on workload 6 at load 1.0
is 2,446 s (Tiresias+TunedJobs 3,470 s).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_pollux_fidelity.py \
        --workloads 1 2 3 4 5 6 7 8 --loads 1 --policies pollux tiresias:threshold=57600
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor

from hadar.api import simulate

CLUSTER = "pollux-64t4"
ROUND_S = 60.0
CLUSTER_GPUS = 64


def workload_name(number: int, load: float) -> str:
    return f"pollux-{number}" if load == 1.0 else f"pollux-{number}-load-{load:g}"


def run_cell(cell: tuple[str, int, float]) -> dict[str, object]:
    """One simulation; ``policy`` is ``name`` or ``name:key=value,...`` (policy options)."""
    policy, number, load = cell
    name, _, opts = policy.partition(":")
    options = dict(kv.split("=", 1) for kv in opts.split(",") if kv)
    t0 = time.process_time()
    sim = simulate(
        CLUSTER, workload_name(number, load), name, round_s=ROUND_S, policy_options=options
    )
    s = sim.summary
    per_job_round = sim.placements.groupby(["round", "job"]).agg(
        gpus=("gpus", "first"), batch=("batch_size", "first")
    )
    return {
        "policy": policy,
        "workload": number,
        "load": load,
        "avg_jct_s": s["avg_jct_s"],
        "p99_jct_s": s["p99_jct_s"],
        "makespan_s": s["ttd_s"],
        "gpu_hours": s["gru"] * CLUSTER_GPUS * s["ttd_s"] / 3600,
        "avg_gpus": float(per_job_round.gpus.mean()),
        "avg_batch": float(per_job_round.batch.mean()),
        "completed": s["completed"],
        "cpu_s": time.process_time() - t0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", type=int, nargs="+", default=[6])
    ap.add_argument("--loads", type=float, nargs="+", default=[1.0])
    ap.add_argument("--policies", nargs="+", default=["pollux", "tiresias"])
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    cells = [(p, n, ld) for n in args.workloads for ld in args.loads for p in args.policies]
    print(
        "| policy | workload | load | avg JCT (s) | p99 JCT (s) | makespan (s) | GPU-hours "
        "| avg GPUs/job | avg batch/job | done | CPU s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
    with ProcessPoolExecutor(args.workers) as pool:
        for r in pool.map(
            run_cell, cells
        ):  # in order, each row as soon as it and those before are done
            print(
                f"| {r['policy']} | {r['workload']} | {r['load']:g} | {r['avg_jct_s']:,.0f} "
                f"| {r['p99_jct_s']:,.0f} | {r['makespan_s']:,.0f} | {r['gpu_hours']:,.1f} "
                f"| {r['avg_gpus']:.2f} | {r['avg_batch']:,.0f} | {r['completed']} | {r['cpu_s']:.0f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
