"""BFTrainer's resource utilisation efficiency U on HPO (the set-up of ``hadar reproduce
bftrainer``) against how a leave is modelled: ``none`` loses no work (BFTrainer's model, the
default: Elastic Horovod keeps the state in memory and a leave costs the forced scale-down,
R_dw), a number of seconds is a checkpoint interval, and a leave loses the work since the
Trainer's last checkpoint (``ReplayConfig.checkpoint_s``). Prints per interval: U (mean and
range over the windows), the share of the work lost to roll-backs, node-h/h lost to rescaling
and to forced scale-downs.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_bftrainer_checkpoint.py [--nodes 512] [--windows 4] [--checkpoints none,1800,600]
"""

from __future__ import annotations

import argparse
import time
from statistics import fmean

from hadar.experiments.reproduce.bftrainer import WINDOW_H
from hadar.experiments.reproduce.replays import ReplayCell, run_replays


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--nodes", type=int, default=512)
    ap.add_argument("--windows", type=int, default=4)
    ap.add_argument("--checkpoints", default="none,3600,1800,600,300")
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    print(
        "| checkpoint | U mean | U range | work lost | rescale node-h/h | preempt node-h/h | wall s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for text in args.checkpoints.split(","):
        interval = None if text == "none" else float(text)
        cells = [
            ReplayCell("bftrainer", "hpo", args.nodes, WINDOW_H, seed, checkpoint_s=interval)
            for seed in range(args.windows)
        ]
        t0 = time.perf_counter()
        done = run_replays(cells, args.workers)
        u = [done[c]["utilisation"] for c in cells]
        print(
            f"| {text} | {fmean(u):.1%} | {min(u):.1%}-{max(u):.1%} "
            f"| {fmean(done[c]['lost_work_share'] for c in cells):.1%} "
            f"| {fmean(done[c]['rescale_node_h_per_h'] for c in cells):.2f} "
            f"| {fmean(done[c]['preempt_node_h_per_h'] for c in cells):.2f} "
            f"| {time.perf_counter() - t0:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
