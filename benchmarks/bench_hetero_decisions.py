"""Decision time of Hadar against Sia on the heterogeneous elastic scenario: every Pollux workload
on ``pollux-hetero-64`` (64 GPUs of three types) at the given loads, each policy's whole run in a
process of its own (so neither finds tables the other's run built), average and slowest decision.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_hetero_decisions.py [--workloads 1-8]
        [--loads 0.5 1 2] [--policies hadar sia] [--repeat N] [--clock wall|cpu]

A decision's time is what the round loop records for it (``decision_seconds`` of ``rounds.csv``,
wall seconds around ``policy.decide``), as ``hadar compare`` reports it; run it on a quiet
machine. ``--clock cpu`` times each decision in CPU seconds of the deciding thread instead
(what a busy or shared machine disturbs least). ``--repeat N`` runs each cell N times, the
policies in turn (A B A B ...), and reports each policy's lowest average and lowest slowest
decision over its runs. Prints one markdown row per workload and load.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent


def _child(workload: str, policy: str, clock: str) -> None:
    from hadar import api

    if clock == "cpu":
        _time_decisions_in_cpu_seconds(policy)
    sim = api.simulate("pollux-hetero-64", workload, policy)
    seconds = sim.rounds["decision_seconds"] if clock == "wall" else pd.Series(_CPU_SECONDS)
    print(json.dumps({"mean": float(seconds.mean()), "max": float(seconds.max())}))


_CPU_SECONDS: list[float] = []


def _time_decisions_in_cpu_seconds(policy: str) -> None:
    """Records each ``decide`` of the policy's class in CPU seconds of the calling thread (only
    the outermost call: a policy that runs another of its class inside counts once)."""
    from hadar.policy import policy_class

    cls = policy_class(policy)
    decide = cls.decide
    depth = [0]

    def timed(self: Any, ctx: Any) -> Any:
        depth[0] += 1
        t0 = time.thread_time()
        try:
            return decide(self, ctx)
        finally:
            depth[0] -= 1
            if depth[0] == 0:
                _CPU_SECONDS.append(time.thread_time() - t0)

    cls.decide = timed  # type: ignore[method-assign]


def _workloads(spec: str) -> list[int]:
    lo, _, hi = spec.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default="1-8", help="pollux-N for N in this range")
    ap.add_argument("--loads", nargs="+", default=["0.5", "1", "2"])
    ap.add_argument("--policies", nargs="+", default=["hadar", "sia"])
    ap.add_argument("--repeat", type=int, default=1, help="runs per policy and cell (lowest kept)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
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
            best: dict[str, tuple[float, float]] = {}
            for _ in range(args.repeat):
                for policy in args.policies:
                    out = subprocess.run(
                        [sys.executable, __file__, "--child", workload, policy, args.clock],
                        capture_output=True,
                        text=True,
                        check=True,
                        cwd=ROOT,
                    )
                    got = json.loads(out.stdout.strip().splitlines()[-1])
                    mean, slowest = best.get(policy, (float("inf"), float("inf")))
                    best[policy] = (min(mean, got["mean"]), min(slowest, got["max"]))
            cells = [f"{best[p][0]:.4f} / {best[p][1]:.3f}" for p in args.policies]
            print(f"| {load} | pollux-{n} | {' | '.join(cells)} |", flush=True)


if __name__ == "__main__":
    main()
