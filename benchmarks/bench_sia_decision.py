"""Sia's decision time on pollux-hetero-64 (64 GPUs of three types): CPU seconds of one round
and of its ILP alone, for N jobs of workload pollux-1 at load 2 all arrived, four rounds each
(round 0 profiles every job; later rounds refit the jobs that moved). CPU time, not wall time:
it does not grow with other processes on a shared machine.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_sia_decision.py [--jobs 16 32 64 128]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

import baselines.sia.ilp as ilp
from estimators.throughput import GavelThroughputTable
from hadar.core.cluster_config import load_cluster
from hadar.core.jobs import JobStatus, Placement
from hadar.policy import RoundContext, make_policy
from hadar.workloads.pollux import pollux_jobs
from hadar.workloads.pollux_throughput import PolluxThroughput

ROUNDS = 4


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, nargs="+", default=[16, 32, 64, 128])
    args = ap.parse_args()
    solve = ilp.solve
    ilp_cpu: list[float] = []

    def timed(*a: Any, **k: Any) -> np.ndarray:
        t = time.process_time()
        out = solve(*a, **k)
        ilp_cpu.append(time.process_time() - t)
        return out

    ilp.solve = timed
    cluster = load_cluster("pollux-hetero-64")
    throughput = PolluxThroughput(GavelThroughputTable.bundled())
    print("| jobs | round | decision CPU s | ILP CPU s | placed |")
    print("|---|---|---|---|---|")
    for n in args.jobs:
        statuses = [JobStatus(j, j.total_steps) for j in pollux_jobs("pollux-1-load-2")[:n]]
        policy = make_policy("sia")
        current: dict[tuple[int, int], Placement] = {}
        for r in range(ROUNDS):
            ctx = RoundContext(300.0 * r, r, 60.0, cluster, statuses, current, throughput)
            t = time.process_time()
            plan = policy.decide(ctx)
            cpu = time.process_time() - t
            current = {a.run_key: a.placement for a in plan.assignments}
            print(f"| {n} | {r} | {cpu:.3f} | {ilp_cpu[-1]:.3f} | {plan.info['placed']} |")


if __name__ == "__main__":
    main()
