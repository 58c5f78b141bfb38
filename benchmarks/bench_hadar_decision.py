"""Decision time of one Hadar round vs queue length.

Scenarios (each decision starts from an empty cluster with every job queued: the hardest round,
as at t=0 of the paper's workload):
  * sim-60gpu with 32, 128, 512, 2048 jobs sampled from the paper's Philly workload generator;
  * a generated 1,024-node x 8-GPU mixed cluster (V100/P100/K80 nodes, 8,192 GPUs) with 10,000 jobs.
Prints the median and max over --repeat decisions, and DP statistics.

    .venv/bin/python benchmarks/bench_hadar_decision.py [--repeat 5] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from estimators.throughput import GavelThroughputTable
from hadar.core.cluster import Cluster, Node
from hadar.core.cluster_config import load_cluster
from hadar.core.defaults import SIMULATED
from hadar.core.jobs import Job, JobStatus
from hadar.policy import RoundContext
from hadar.scheduler import HadarPolicy
from hadar.workloads.philly import PhillyOptions, generate


def big_cluster(nodes: int = 1024, per_node: int = 8) -> Cluster:
    types = ("v100", "p100", "k80")
    return Cluster(
        "gen-1024x8", tuple(Node(f"n{i}", {types[i % 3]: per_node}) for i in range(nodes))
    )


def jobs_for(n: int, table: GavelThroughputTable) -> list[Job]:
    out: list[Job] = []
    seed = 0
    while len(out) < n:
        batch = generate(table, PhillyOptions(num_jobs=min(n - len(out), 20000), seed=seed))
        out += [Job(**{**j.__dict__, "job_id": len(out) + i}) for i, j in enumerate(batch)]
        seed += 1
    return out


def cold_round(cluster: Cluster, jobs: list[Job], table: GavelThroughputTable) -> RoundContext:
    """The hardest round: every job queued, none started, on an empty cluster."""
    return RoundContext(
        now=0.0,
        round_index=0,
        round_s=SIMULATED.round_s,
        cluster=cluster,
        jobs=tuple(JobStatus(j, j.total_steps) for j in jobs),
        current={},
        throughput=table,
    )


def time_decision(
    cluster: Cluster, jobs: list[Job], table: GavelThroughputTable, repeat: int
) -> tuple[list[float], dict[str, Any]]:
    ctx = cold_round(cluster, jobs, table)
    times, info = [], {}
    for _ in range(repeat):
        policy = HadarPolicy()
        t0 = time.perf_counter()
        plan = policy.decide(ctx)
        times.append(time.perf_counter() - t0)
        info = dict(plan.info, placed=len(plan.assignments))
    return times, info


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="skip the 10,000-job scenario")
    args = ap.parse_args()
    table = GavelThroughputTable.bundled()
    sim = load_cluster("sim-60gpu")
    rows = []
    for n in (32, 128, 512, 2048):
        t, info = time_decision(sim, jobs_for(n, table), table, args.repeat)
        rows.append(("sim-60gpu (60 GPUs)", n, t, info))
    if not args.quick:
        t, info = time_decision(
            big_cluster(), jobs_for(10_000, table), table, max(1, args.repeat // 2)
        )
        rows.append(("1024 nodes x 8 (8192 GPUs)", 10_000, t, info))
    print(
        f"{'cluster':28} {'jobs':>6} {'median s':>9} {'max s':>8} {'placed':>7} {'window':>6} {'dp states':>9} {'exact':>5}"
    )
    for name, n, t, info in rows:
        print(
            f"{name:28} {n:6d} {statistics.median(t):9.3f} {max(t):8.3f} {info['placed']:7d} "
            f"{info['window']:6d} {info['dp_states']:9d} {str(info['dp_exact']):>5}"
        )


if __name__ == "__main__":
    main()
