"""The exact best forking schedule of a one-job mix, by trying every one: HadarE's TTD beside it.

    PYTHONPATH=. .venv/bin/python benchmarks/fork_exact_one_job.py [--clusters aws-5node lab-5node]
        [--mix M-1] [--rounds 2] [--fork-progress goodput]

A schedule of one job gives it, each round, a set of nodes (one copy on each); the simulator
plays it (360 s rounds, 10 s restart penalty, HadarE's 10 s aggregation per forked round, no
step budget: the copies run until the job's steps are done, the soonest any budgets allow) under
the chosen accounting of forked steps. Every sequence of non-empty node sets of up to
``--rounds`` rounds is played (its last set repeated until the job is done), and the
soonest finish is that mix's exact optimum among forking schedules with these rounds and
overheads: the bound the fork LP (every GPU at once, no rounds, no overheads) can only
approach. docs/results.md ("The physical mixes against the fork bound") quotes it.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Sequence

from hadar import api
from hadar.clusters import load_cluster
from hadar.core.defaults import SIMULATED
from hadar.policy import Assignment, Policy, PolicyInfo, RoundContext, RoundPlan
from hadar.round_progress import job_restart_s


class NodeSets(Policy):
    """Runs the one job present on the node set of each round in turn (the last set again
    once they run out)."""

    name = "node-sets"
    info = PolicyInfo(title="node sets")

    def __init__(self, sets: Sequence[tuple[str, ...]]) -> None:
        self.sets = list(sets)

    def decide(self, ctx: RoundContext) -> RoundPlan:
        (status,) = ctx.jobs
        nodes = self.sets[min(ctx.round_index, len(self.sets) - 1)]
        ran = [p for (j, _), p in ctx.current.items() if j == status.job_id]
        started = status.done_steps > 0
        out = []
        for node in nodes:
            placement = {node: dict(ctx.cluster.node(node).gpus)}
            moved = placement not in ran
            overhead = (
                job_restart_s(status.job, ctx.restart_penalty_s) if moved and started else 0.0
            )
            if len(nodes) > 1:
                overhead += SIMULATED.aggregation_overhead_s
            out.append(
                Assignment(
                    status.job_id,
                    placement,
                    copy=ctx.cluster.node_index[node] + 1,
                    overhead_s=overhead,
                    restart=False,
                )
            )
        return RoundPlan(tuple(out))


def exact(
    cluster: str, mix: str, rounds: int, fork_progress: str
) -> tuple[float, list[tuple[str, ...]]]:
    """The soonest finish over every sequence of node sets (the last repeated until the job
    is done), and one sequence reaching it. Sequences of ``d`` sets hold every schedule that
    finishes within ``d`` rounds, so once the best finishes by then, longer ones cannot beat
    it."""
    names = load_cluster(cluster).node_names
    sets = [s for r in range(1, len(names) + 1) for s in itertools.combinations(names, r)]
    best: tuple[float, list[tuple[str, ...]]] = (float("inf"), [])
    for depth in range(1, rounds + 1):
        for seq in itertools.product(sets, repeat=depth):
            ttd = api.simulate(cluster, mix, NodeSets(seq), fork_progress=fork_progress).summary[
                "ttd_s"
            ]
            if ttd < best[0]:
                best = (ttd, list(seq))
        if best[0] <= 360.0 * depth:
            return best
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clusters", nargs="+", default=["aws-5node", "lab-5node"])
    ap.add_argument("--mix", default="M-1")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--fork-progress", default="goodput", choices=("goodput", "steps"))
    args = ap.parse_args()
    for cluster in args.clusters:
        ttd, seq = exact(cluster, args.mix, args.rounds, args.fork_progress)
        hadare = api.simulate(
            cluster, args.mix, "hadare", fork_progress=args.fork_progress
        ).summary["ttd_s"]
        plan = " | ".join(",".join(s) for s in seq)
        print(
            f"{cluster} {args.mix} ({args.fork_progress}): exact best {ttd:,.1f} s ({plan}); "
            f"HadarE {hadare:,.1f} s ({hadare / ttd:.4f}x)"
        )


if __name__ == "__main__":
    main()
