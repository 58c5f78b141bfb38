"""HadarE against Hadar when nodes of the paper's physical clusters come and go: each mix on
``aws-5node`` and ``lab-5node`` under random node streams (a few leaves and joins, every node back
at the end), TTD and average JCT of HadarE over Hadar's. Where nodes may change HadarE does not
look ahead (its rollouts play on the nodes up now); the never-behind rule holds each job to plain
Hadar's replay (docs/results.md, "HadarE under node churn").

    PYTHONPATH=. .venv/bin/python benchmarks/hadare_churn.py [--mixes M-3,M-5,M-8] [--seeds 4]
"""

from __future__ import annotations

import argparse
import random

from estimators.throughput import GavelThroughputTable
from hadar.clusters import load_cluster
from hadar.core.cluster import Cluster
from hadar.core.node_stream import NodeEvent, NodeStream, build_stream
from hadar.scenario import throughput_for
from hadar.scheduler import HadarPolicy
from hadar.simulator import SimConfig, simulate
from hadar.simulator.records import JobRecord
from hadar.workloads.mixes import mix_jobs
from hadare.policy import HadarEPolicy

ROUND_S = 360.0
RESTART_S = 10.0


def random_stream(cluster: Cluster, seed: int, events: int = 6) -> NodeStream:
    """Every node up at 0; ``events`` times, 100-900 s apart, a random node leaves (never the
    last one up) or, if it is down, joins again; the nodes still down then join 200 s apart."""
    names = [n.name for n in cluster.nodes]
    rng = random.Random(seed)
    stream = [NodeEvent(0.0, n, "join") for n in names]
    t, up = 0.0, set(names)
    for _ in range(events):
        t += rng.uniform(100.0, 900.0)
        node = rng.choice(names)
        if node in up and len(up) > 1:
            stream.append(NodeEvent(t, node, "leave"))
            up.discard(node)
        elif node not in up:
            stream.append(NodeEvent(t, node, "join"))
            up.add(node)
    for node in names:
        if node not in up:
            t += 200.0
            stream.append(NodeEvent(t, node, "join"))
    return build_stream(stream, end=1e6)


def _finish(job: JobRecord) -> float:
    if job.finish is None:
        raise SystemExit(f"job {job.job_id} did not finish")
    return job.finish


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mixes", default="M-3,M-5,M-8")
    ap.add_argument("--seeds", type=int, default=4, help="streams per cell (seeds 0 .. N-1)")
    args = ap.parse_args()
    table = GavelThroughputTable.bundled()
    print("| cluster | mix | seed | HadarE / Hadar TTD | HadarE / Hadar average JCT |")
    print("|---|---|---:|---:|---:|")
    behind = cells = 0
    for name in ("aws-5node", "lab-5node"):
        cluster = load_cluster(f"cluster_configs/{name}.yaml")
        for mix in args.mixes.split(","):
            jobs = mix_jobs(mix)
            for seed in range(args.seeds):
                cfg = SimConfig(
                    round_s=ROUND_S,
                    restart_penalty_s=RESTART_S,
                    node_stream=random_stream(cluster, seed),
                )
                runs = [
                    simulate(cluster, jobs, policy, throughput_for(jobs, cluster, table), cfg)
                    for policy in (HadarPolicy(), HadarEPolicy())
                ]
                ttd = [max(_finish(j) for j in r.jobs) for r in runs]
                jct = [sum(_finish(j) - j.arrival for j in r.jobs) for r in runs]
                late = ttd[1] > ttd[0] * (1 + 1e-9) or jct[1] > jct[0] * (1 + 1e-9)
                behind += late
                cells += 1
                mark = " (behind)" if late else ""
                print(
                    f"| {name} | {mix} | {seed} | {ttd[1] / ttd[0]:.3f} | "
                    f"{jct[1] / jct[0]:.3f}{mark} |"
                )
    print(f"\nHadarE behind Hadar (TTD or average JCT) on {behind} of {cells} cells")


if __name__ == "__main__":
    main()
