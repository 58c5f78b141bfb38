"""Average JCT of AFS against other policies on Pollux's workloads and the elastic Philly
workload (docs/results.md, "AFS"). Prints a markdown table per workload family and the ratio of
each policy's average JCT to AFS's (> 1: AFS better), next to the paper's 1.9-3.1x over Tiresias.

    .venv/bin/python benchmarks/afs_jct.py pollux [--workloads 1-8] [--loads 1,2] \\
        [--policies afs,tiresias] [--round 60] [--workers 2]
    .venv/bin/python benchmarks/afs_jct.py philly [--sizes 120,480] [--cluster sim-60gpu] \\
        [--policies afs,afs-het,tiresias] [--round 360]

``pollux`` runs ``pollux-N[-load-L]`` on ``pollux-64t4`` (16 nodes x 4 T4); ``philly`` runs
``philly-N-elastic`` (each job may run on 1 GPU up to its request; rigid policies get the
request) on the given cluster. One simulation per (workload, policy), seed 0.
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Cell:
    cluster: str
    workload: str
    policy: str
    round_length: float


def run(cell: Cell) -> dict[str, float]:
    from hadar.api import simulate

    s = simulate(cell.cluster, cell.workload, cell.policy, round_length=cell.round_length).summary
    return {k: float(s[k]) for k in ("avg_jct_s", "ttd_s", "restarts_per_job", "completed")}


def parse_range(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def table(cells: list[Cell], results: list[dict[str, float]], policies: list[str]) -> None:
    by = {(c.workload, c.policy): r for c, r in zip(cells, results, strict=True)}
    workloads = list(dict.fromkeys(c.workload for c in cells))
    others = [p for p in policies if p != "afs"]
    head = " | ".join(f"{p} avg JCT (s)" for p in policies)
    ratios = " | ".join(f"{p} / afs" for p in others)
    print(f"| workload | {head} | {ratios} |")
    print("|---" * (1 + len(policies) + len(others)) + "|")
    per_policy: dict[str, list[float]] = {p: [] for p in others}
    for w in workloads:
        afs = by[(w, "afs")]["avg_jct_s"] if "afs" in policies else float("nan")
        jcts = " | ".join(f"{by[(w, p)]['avg_jct_s']:,.0f}" for p in policies)
        rs = []
        for p in others:
            r = by[(w, p)]["avg_jct_s"] / afs
            per_policy[p].append(r)
            rs.append(f"{r:.2f}x")
        print(f"| {w} | {jcts} | {' | '.join(rs)} |")
    for p, rs in per_policy.items():
        if rs:
            print(
                f"\n{p} / afs: min {min(rs):.2f}x, median {statistics.median(rs):.2f}x, "
                f"max {max(rs):.2f}x over {len(rs)} workloads"
            )


def main() -> None:
    from hadar.sweep import run_cells

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("family", choices=("pollux", "philly"))
    parser.add_argument("--workloads", default="1-8", help="pollux: workload numbers")
    parser.add_argument("--loads", default="1,2", help="pollux: relative loads")
    parser.add_argument("--sizes", default="120,480", help="philly: job counts")
    parser.add_argument("--cluster", default=None)
    parser.add_argument("--policies", default="afs,tiresias")
    parser.add_argument("--round", type=float, default=None)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", default=None, help="also write the raw results here")
    args = parser.parse_args()
    policies = args.policies.split(",")
    if args.family == "pollux":
        cluster, rnd = args.cluster or "pollux-64t4", args.round or 60.0
        names = [
            f"pollux-{n}" if float(load) == 1.0 else f"pollux-{n}-load-{float(load):g}"
            for load in args.loads.split(",")
            for n in parse_range(args.workloads)
        ]
    else:
        cluster, rnd = args.cluster or "sim-60gpu", args.round or 360.0
        names = [f"philly-{n}-elastic" for n in parse_range(args.sizes)]
    cells = [Cell(cluster, w, p, rnd) for w in names for p in policies]
    results = run_cells(run, cells, workers=args.workers)
    print(f"cluster {cluster}, round {rnd:g} s, seed 0\n")
    table(cells, results, policies)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([{**c.__dict__, **r} for c, r in zip(cells, results, strict=True)], fh)


if __name__ == "__main__":
    main()
