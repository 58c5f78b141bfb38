"""How much better HadarE's look-ahead could do by judging every one-round plan.

    PYTHONPATH=. .venv/bin/python benchmarks/hadare_one_round_search.py --cluster lab-5node \
        --mix M-3 --at 0

In the round that starts at ``--at`` seconds, the look-ahead also plays every way of giving each
node whole to one of the jobs, or leaving it idle ((jobs + 1) ** nodes plans), each followed by
HadarE without look-ahead, as it plays its own candidates; it takes one only if its rollout
finishes the jobs sooner and never later than plain Hadar (the look-ahead's rule). Prints the
TTD and average JCT of the run with and without the search. A measurement, not a policy: it
extends the candidates by wrapping ``hadare.policy._swaps``.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Mapping

import hadare.policy as hadare_policy
from hadar.api import simulate
from hadar.core.jobs import Placement
from hadar.policy import RoundContext
from hadar.valuation import JobValuation
from hadare.policy import HadarEConfig, HadarEPolicy, _Candidate


def every_plan(ctx: RoundContext, jobs: list[int], base: str) -> list[_Candidate]:
    """Each node whole to one job, or idle: every combination."""
    nodes = ctx.cluster.nodes
    out = []
    for choice in itertools.product([None, *jobs], repeat=len(nodes)):
        copies: dict[int, dict[str, Placement]] = {}
        for node, job in zip(nodes, choice, strict=True):
            if job is not None:
                copies.setdefault(job, {})[node.name] = {node.name: dict(node.gpus)}
        out.append(_Candidate(base, copies, 0))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cluster", default="lab-5node")
    parser.add_argument("--mix", default="M-3")
    parser.add_argument("--at", type=float, default=0.0, help="the round's start (s)")
    args = parser.parse_args()
    swaps = hadare_policy._swaps

    def with_every_plan(
        kept: _Candidate, last: int | None, vals: Mapping[int, JobValuation], ctx: RoundContext
    ) -> list[_Candidate]:
        out = swaps(kept, last, vals, ctx)
        return out + every_plan(ctx, sorted(vals), kept.base) if ctx.now == args.at else out

    plain = simulate(args.cluster, args.mix, policy="hadare").summary
    hadare_policy._swaps = with_every_plan
    try:
        config = HadarEConfig(lookahead_budget=10**7, lookahead_rounds=40)
        searched = simulate(args.cluster, args.mix, policy=HadarEPolicy(config)).summary
    finally:
        hadare_policy._swaps = swaps
    for name, s in (("HadarE", plain), (f"every plan at {args.at:g} s", searched)):
        print(
            f"{args.cluster} {args.mix} {name}: TTD {s['ttd_s']:,.1f} s, avg JCT {s['avg_jct_s']:,.1f} s"
        )


if __name__ == "__main__":
    main()
