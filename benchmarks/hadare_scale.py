"""HadarE on large clusters of one-GPU nodes: TTD and decision time, with and without look-ahead.

    PYTHONPATH=. .venv/bin/python benchmarks/hadare_scale.py [--nodes 16 32 64 100 200 500]
        [--mixes M-5 M-12] [--look-ahead-up-to 200]

Clusters of N one-GPU nodes (V100, P100, K80 in turn); the physical mixes at the paper's size,
360 s rounds (``hadar simulate --cluster C --workload M --policy hadare``). Per cell: the TTD and
the average CPU seconds of a decision, with the look-ahead (``lookahead_nodes=N``; only up to
``--look-ahead-up-to`` nodes, it costs about 4-5 times as much) and without (``lookahead_nodes=0``).
The table in docs/results.md ("HadarE on large clusters") comes from this script.
"""

from __future__ import annotations

import argparse
import time

from hadar import api
from hadar.core.cluster import Cluster, Node
from hadar.policy import Policy, RoundContext, RoundPlan
from hadar.policy_options import policy_with_options

TYPES = ("v100", "p100", "k80")


def one_gpu_nodes(n: int) -> Cluster:
    return Cluster(f"one-gpu-{n}", tuple(Node(f"n{i}", {TYPES[i % 3]: 1}) for i in range(n)))


def run(nodes: int, mix: str, look_ahead: bool) -> tuple[float, float]:
    """TTD (s) and average CPU seconds per decision."""
    policy: Policy = policy_with_options(
        "hadare", {"lookahead_nodes": str(nodes if look_ahead else 0)}
    )
    decide = policy.decide
    spent: list[float] = []

    def timed(ctx: RoundContext) -> RoundPlan:
        c0 = time.process_time()
        plan = decide(ctx)
        spent.append(time.process_time() - c0)
        return plan

    policy.decide = timed  # type: ignore[method-assign]
    summary = api.simulate(one_gpu_nodes(nodes), mix, policy).summary
    return float(summary["ttd_s"]), sum(spent) / len(spent)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[16, 32, 64, 100, 200, 500])
    ap.add_argument("--mixes", nargs="+", default=["M-5", "M-12"])
    ap.add_argument("--look-ahead-up-to", type=int, default=200)
    args = ap.parse_args()
    print("| nodes | mix | with the look-ahead: TTD | decision | without: TTD | decision |")
    print("|---:|---|---:|---:|---:|---:|")
    for n in args.nodes:
        for mix in args.mixes:
            with_ = "| | |"
            if n <= args.look_ahead_up_to:
                ttd, dec = run(n, mix, True)
                with_ = f"| {ttd:,.0f} | {dec:.2f} |"
            ttd0, dec0 = run(n, mix, False)
            print(f"| {n} | {mix} {with_} {ttd0:,.0f} | {dec0:.2f} |", flush=True)


if __name__ == "__main__":
    main()
