"""BFTrainer (exact scalability), FreeTrain (a guess) and MalleTrain (JPA profiling) on the same
generated node streams, in the event-driven replay of ``hadar/simulator/malleable.py``
(docs/bftrainer.md): Trainers with BFTrainer's Table 2 scalability, ``--trainers`` of them
(``nas``: the seven DNNs in turn; ``hpo``: all ShuffleNet), ``--samples`` each, at most 10 at
once, on a ``--nodes``-node machine whose idle nodes follow the Summit or Theta preset for
``--hours``. Prints per system: aggregate useful throughput, Trainers completed, node-hours
lost to rescaling and to preemption per hour, and the ratio to FreeTrain.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_malleable.py [--nodes 256] [--hours 4] [--samples 1.28e8]
"""

from __future__ import annotations

import argparse
import time

from hadar.simulator.malleable import SYSTEMS, ReplayConfig, replay
from hadar.workloads.malleable import trainer_workload
from hadar.workloads.node_streams import PRESETS, generate_stream


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--nodes", type=int, default=256)
    ap.add_argument("--hours", type=float, default=4.0)
    ap.add_argument("--trainers", type=int, default=300)
    ap.add_argument("--samples", type=float, default=1.28e8)  # 100 ImageNet epochs (the papers)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--presets", default="summit,theta")
    ap.add_argument("--workloads", default="nas,hpo")
    args = ap.parse_args()
    nodes = [f"n{i:04d}" for i in range(args.nodes)]
    print(
        "| stream | workload | system | samples/s | vs FreeTrain | completed | rescale node-h/h | preempt node-h/h | decisions (time-limited) | wall s |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for preset in args.presets.split(","):
        stream = generate_stream(nodes, args.hours, args.seed, PRESETS[preset])
        for kind in args.workloads.split(","):
            jobs = trainer_workload(kind, args.trainers, samples=args.samples)
            results = {}
            for system in SYSTEMS:
                t0 = time.perf_counter()
                results[system] = (
                    replay(stream, nodes, jobs, ReplayConfig(system=system)),
                    time.perf_counter() - t0,
                )
            base = results["freetrain"][0].throughput
            for system, (r, wall) in results.items():
                print(
                    f"| {preset} | {kind} | {system} | {r.throughput:,.0f} | {r.throughput / base - 1:+.1%} "
                    f"| {r.completed} | {r.lost_rescale_node_s / 3600 / r.hours:.2f} "
                    f"| {r.lost_preempt_node_s / 3600 / r.hours:.2f} | {r.decisions} ({r.time_limited}) "
                    f"| {wall:.0f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
