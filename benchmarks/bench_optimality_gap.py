"""How far Hadar's round plan is from the optimum of the same round problem.

Random rounds: N jobs drawn by the paper's Philly generator (random progress, so some pay the
checkpoint-restart), on sim-60gpu or a random mixed cluster (2-6 nodes of 4 GPUs per type),
priced as the default policy prices them (per-type LP duals). For each round the exact optimum
over every placement (``primal_dual.exact.round_optimum``, a HiGHS ILP) is compared with

* the DP alone (Algorithm 2 over the whole queue, default beam), and
* the default round's selection (``admit``: the DP over the window, then the greedy remainder).

Prints, per size, the payoff as a fraction of the optimum (median, worst), how often the DP
reported ``exact`` and how often it then reached the optimum, and the ILP's solve time.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_optimality_gap.py [--rounds 20] [--sizes 8,16,32,64]
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

import numpy as np

from estimators.throughput import GavelThroughputTable
from hadar.core.cluster import Cluster, Node
from hadar.core.cluster_config import load_cluster
from hadar.core.defaults import SIMULATED
from hadar.core.jobs import Job, JobStatus
from hadar.policy import RoundContext
from hadar.scheduler import HadarPolicy, admit
from hadar.workloads.philly import PhillyOptions, generate
from primal_dual.dp import plan_queue
from primal_dual.exact import round_optimum


def random_cluster(rng: np.random.Generator) -> Cluster:
    nodes = []
    for gtype in ("v100", "p100", "k80"):
        nodes += [Node(f"{gtype}-{i}", {gtype: 4}) for i in range(int(rng.integers(2, 7)))]
    return Cluster("random-mixed", tuple(nodes))


def random_round(
    rng: np.random.Generator, n: int, cluster: Cluster, table: GavelThroughputTable
) -> RoundContext:
    jobs = generate(table, PhillyOptions(num_jobs=n, seed=int(rng.integers(1 << 30))))
    jobs = [Job(**{**j.__dict__, "arrival": 0.0}) for j in jobs]
    statuses = tuple(JobStatus(j, max(1, int(j.total_steps * rng.uniform(0.1, 1.0)))) for j in jobs)
    return RoundContext(
        now=float(rng.uniform(0, 7200)),
        round_index=1,
        round_s=SIMULATED.round_s,
        cluster=cluster,
        jobs=statuses,
        current={},
        throughput=table,
    )


def measure(ctx: RoundContext) -> dict[str, float | bool]:
    policy = HadarPolicy()
    _, entries, cache = policy.round_problem(ctx, {})
    free = ctx.cluster.capacity.copy()
    t0 = time.perf_counter()
    best = round_optimum(entries, free, cache, time_limit_s=120.0)
    ilp_s = time.perf_counter() - t0
    dp = plan_queue(entries, free, cache, beam=policy.config.beam)
    placed, _ = admit(entries, free.copy(), ctx, cache, replace(policy.config, backfill=False))
    by_key = {e.key: e for e in entries}
    round_total = sum(by_key[k].payoff(c) for k, c in placed)
    opt = best.total_payoff
    return {
        "dp": dp.total_payoff / opt if opt > 0 else 1.0,
        "round": round_total / opt if opt > 0 else 1.0,
        "exact": dp.exact,
        "ilp_s": ilp_s,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--sizes", default="8,16,32,64")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    table = GavelThroughputTable.bundled()
    rng = np.random.default_rng(args.seed)
    sim = load_cluster("sim-60gpu")
    print(
        f"{'jobs':>5} {'rounds':>6} {'DP median':>9} {'DP worst':>8} {'round median':>12} {'round worst':>11} "
        f"{'DP exact':>8} {'exact=opt':>9} {'ILP s med':>9}"
    )
    for n in (int(s) for s in args.sizes.split(",")):
        rows = []
        for r in range(args.rounds):
            cluster = sim if r % 2 == 0 else random_cluster(rng)
            rows.append(measure(random_round(rng, n, cluster, table)))
        dp = [float(m["dp"]) for m in rows]
        rd = [float(m["round"]) for m in rows]
        exact = [m for m in rows if m["exact"]]
        at_opt = sum(1 for m in exact if float(m["dp"]) >= 1 - 1e-9)
        print(
            f"{n:5d} {len(rows):6d} {statistics.median(dp):9.2%} {min(dp):8.2%} {statistics.median(rd):12.2%} "
            f"{min(rd):11.2%} {len(exact):8d} {at_opt:9d} {statistics.median(float(m['ilp_s']) for m in rows):9.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
