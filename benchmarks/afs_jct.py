"""Average JCT of AFS against other policies on Pollux's workloads and the elastic Philly
workload (docs/results.md, "AFS"). Prints a markdown table per workload family and the ratio of
each policy's average JCT to AFS's (> 1: AFS better), next to the paper's 1.9-3.1x over Tiresias.

    .venv/bin/python benchmarks/afs_jct.py pollux [--workloads 1-8] [--loads 1,2] \\
        [--policies afs,tiresias] [--round 60] [--workers 2] [--free-restarts]
    .venv/bin/python benchmarks/afs_jct.py philly [--sizes 120,480] [--cluster sim-60gpu] \\
        [--policies afs,afs-het,tiresias] [--round 360]
    .venv/bin/python benchmarks/afs_jct.py mixes [--mixes 1-12] [--cluster lab-5node] \\
        [--policies afs,afs:pools=per-type,afs-het]

``pollux`` runs ``pollux-N[-load-L]`` on ``pollux-64t4`` (16 nodes x 4 T4); ``philly`` runs
``philly-N-elastic`` (each job may run on 1 GPU up to its request; rigid policies get the
request) on the given cluster; ``mixes`` runs the physical mixes ``M-1..M-12`` (paper sizes) on a
physical cluster. A policy may carry one knob, ``name:key=value``. One simulation per (workload,
policy), seed 0.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class Cell:
    cluster: str
    workload: str
    policy: str
    round_s: float
    free_restarts: bool = False


def run(cell: Cell) -> dict[str, float]:
    from hadar.api import simulate

    name, _, knob = cell.policy.partition(":")
    options = dict([knob.split("=", 1)]) if knob else None
    workload: Any = cell.workload
    if cell.free_restarts:  # CoDDL-like rescaling: no re-allocation delay for any job
        from hadar.workloads.pollux import pollux_jobs

        workload = [replace(j, restart_s=0.0) for j in pollux_jobs(cell.workload)]
    s = simulate(cell.cluster, workload, name, round_s=cell.round_s, policy_options=options).summary
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
    for p, got in per_policy.items():
        if got:
            print(
                f"\n{p} / afs: min {min(got):.2f}x, median {statistics.median(got):.2f}x, "
                f"max {max(got):.2f}x over {len(got)} workloads"
            )


def main() -> None:
    from hadar.sweep import run_cells

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("family", choices=("pollux", "philly", "mixes"))
    parser.add_argument("--mixes", default="1-12", help="mixes: mix numbers")
    parser.add_argument("--workloads", default="1-8", help="pollux: workload numbers")
    parser.add_argument("--loads", default="1,2", help="pollux: relative loads")
    parser.add_argument("--sizes", default="120,480", help="philly: job counts")
    parser.add_argument("--cluster", default=None)
    parser.add_argument("--policies", default="afs,tiresias")
    parser.add_argument("--round", type=float, default=None)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--free-restarts", action="store_true", help="pollux: no re-allocation delay for any job"
    )
    parser.add_argument(
        "--json",
        default=None,
        help="append each result here as a JSON line as it arrives; cells already there are "
        "not run again",
    )
    args = parser.parse_args()
    policies = args.policies.split(",")
    if args.family == "pollux":
        cluster, rnd = args.cluster or "pollux-64t4", args.round or 60.0
        names = [
            f"pollux-{n}" if float(load) == 1.0 else f"pollux-{n}-load-{float(load):g}"
            for load in args.loads.split(",")
            for n in parse_range(args.workloads)
        ]
    elif args.family == "philly":
        cluster, rnd = args.cluster or "sim-60gpu", args.round or 360.0
        names = [f"philly-{n}-elastic" for n in parse_range(args.sizes)]
    else:
        cluster, rnd = args.cluster or "lab-5node", args.round or 360.0
        names = [f"M-{n}" for n in parse_range(args.mixes)]
    cells = [Cell(cluster, w, p, rnd, args.free_restarts) for w in names for p in policies]
    done: dict[Cell, dict[str, float]] = {}
    if args.json and os.path.exists(args.json):
        with open(args.json) as fh:
            for line in fh:
                row = json.loads(line)
                keys = ("cluster", "workload", "policy", "round_s", "free_restarts")
                cell = Cell(*(row.pop(k, False) for k in keys))
                done[cell] = row

    def save(cell: Cell, result: dict[str, float]) -> None:
        done[cell] = result
        print(f"{cell.workload} {cell.policy}: avg JCT {result['avg_jct_s']:,.0f} s", flush=True)
        if args.json:
            with open(args.json, "a") as fh:
                fh.write(json.dumps({**cell.__dict__, **result}) + "\n")

    run_cells(run, [c for c in cells if c not in done], workers=args.workers, on_done=save)
    print(f"\ncluster {cluster}, round {rnd:g} s, seed 0\n")
    table(cells, [done[c] for c in cells], policies)


if __name__ == "__main__":
    main()
