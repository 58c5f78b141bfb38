"""HadarE on the paper's physical mixes against two lower bounds on any forking schedule's TTD:
the fork bound (forked steps counted in full, ``hadar.experiments.bounds``) and the same bound
under the simulator's default ``goodput`` accounting of forks, where each of k copies of a job
progresses at most at the combined batch's efficiency (``discounted_fork_s``, each job's
largest factor over its training). It separates what the accounting costs HadarE from what the
rounds, overheads and decisions cost. HadarE runs under both accountings, so each run is also set
beside the bound of its own accounting (the fork bound is the step sum's, ``--fork-progress
steps``; the goodput bound the default's).

    PYTHONPATH=. .venv/bin/python benchmarks/fork_bound_goodput.py [--round 360]
"""

from __future__ import annotations

import argparse

import numpy as np

from hadar import api
from hadar.experiments.bounds import discounted_fork_s, mix_bounds, rate_matrix
from hadar.experiments.grid import scenario
from hadar.workloads.fork_efficiency import largest_fork_factors

MIXES = ("M-1", "M-2", "M-3", "M-4", "M-5", "M-6", "M-8", "M-10", "M-12")
CLUSTERS = ("aws-5node", "lab-5node")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--round", type=float, default=360.0, help="round length (s)")
    args = parser.parse_args()
    print(
        "| cluster | mix | HadarE TTD | fork bound | goodput bound | HadarE / fork "
        "| HadarE / goodput | HadarE TTD, steps | steps: HadarE / fork |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in CLUSTERS:
        for mix in MIXES:
            cluster, jobs, throughput = scenario(name, mix)
            rates = rate_matrix(jobs, cluster, throughput)
            if rates is None:
                continue
            steps = [j.total_steps for j in jobs]
            factors = np.array([largest_fork_factors(j, rates.shape[1], throughput) for j in jobs])
            fork = mix_bounds(jobs, cluster, throughput).fork_s or 0.0
            goodput = discounted_fork_s(rates, steps, factors)
            ttd = api.simulate(name, mix, "hadare", round_s=args.round).summary["ttd_s"]
            steps_ttd = api.simulate(
                name, mix, "hadare", round_s=args.round, fork_progress="steps"
            ).summary["ttd_s"]
            print(
                f"| {name} | {mix} | {ttd:,.0f} | {fork:,.0f} | {goodput:,.0f} "
                f"| {ttd / fork:.3f} | {ttd / goodput:.3f} | {steps_ttd:,.0f} "
                f"| {steps_ttd / fork:.3f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
