"""Decision time of Hadar against Sia on the heterogeneous elastic scenario: every Pollux workload
on ``pollux-hetero-64`` (64 GPUs of three types) at the given loads, each policy's whole run in a
process of its own (so neither finds tables the other's run built), average and slowest decision.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_hetero_decisions.py [--workloads 1-8]
        [--loads 0.5 1 2] [--policies hadar sia]

A decision's time is what the round loop records for it (``decision_seconds`` of ``rounds.csv``,
wall seconds around ``policy.decide``), as ``hadar compare`` reports it; run it on a quiet
machine. Prints one markdown row per workload and load.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _child(workload: str, policy: str) -> None:
    from hadar import api

    sim = api.simulate("pollux-hetero-64", workload, policy)
    seconds = sim.rounds["decision_seconds"]
    print(json.dumps({"mean": float(seconds.mean()), "max": float(seconds.max())}))


def _workloads(spec: str) -> list[int]:
    lo, _, hi = spec.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default="1-8", help="pollux-N for N in this range")
    ap.add_argument("--loads", nargs="+", default=["0.5", "1", "2"])
    ap.add_argument("--policies", nargs="+", default=["hadar", "sia"])
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(*args.child)
        return
    head = " | ".join(f"{p}: average / max (s)" for p in args.policies)
    print(f"| load | workload | {head} |")
    print("|---|---|" + "---|" * len(args.policies))
    for load in args.loads:
        for n in _workloads(args.workloads):
            workload = f"pollux-{n}" if float(load) == 1.0 else f"pollux-{n}-load-{load}"
            cells = []
            for policy in args.policies:
                out = subprocess.run(
                    [sys.executable, __file__, "--child", workload, policy],
                    capture_output=True,
                    text=True,
                    check=True,
                    cwd=ROOT,
                )
                got = json.loads(out.stdout.strip().splitlines()[-1])
                cells.append(f"{got['mean']:.4f} / {got['max']:.3f}")
            print(f"| {load} | pollux-{n} | {' | '.join(cells)} |", flush=True)


if __name__ == "__main__":
    main()
