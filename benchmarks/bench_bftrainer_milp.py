"""Time of one BFTrainer MILP decision (``bftrainer/milp.py``) at the issue's two sizes,
with HiGHS's optimality gap, per formulation.

Instances: ``--nodes`` idle nodes and ``--jobs`` Trainers whose scalability is a Table 2 model
of BFTrainer (cycled), ``N_min`` 1-2, ``N_max`` 8-64, each holding a random number of nodes
(``C_j``) that together fill about 80 % of the pool, ``R_up`` 20 s, ``R_dw`` 5 s, ``T_fwd`` 120 s;
``--repeats`` seeded instances per size (the paper repeats 10 times with random initial maps).
The paper's node formulation is timed at the small size only, with the time limit.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_bftrainer_milp.py [--repeats 5] [--time-limit 10]
"""

from __future__ import annotations

import argparse
import random
import statistics

from bftrainer.milp import Trainer, solve
from hadar.workloads.malleable import TABLE2, table2_points

SIZES = ((500, 50), (5000, 200))


def instance(
    n_nodes: int, n_jobs: int, seed: int
) -> tuple[list[Trainer], list[str], dict[int, list[str]]]:
    rng = random.Random(seed)
    pool = [f"n{i:05d}" for i in range(n_nodes)]
    free = list(pool)
    rng.shuffle(free)
    models = list(TABLE2)
    trainers, current = [], {}
    share = int(0.8 * n_nodes / n_jobs)
    for j in range(n_jobs):
        n_max = rng.choice([8, 16, 32, 64])
        n_min = rng.choice([1, 2])
        c = min(
            len(free), rng.choice([0, n_min, rng.randint(n_min, max(n_min, min(n_max, 2 * share)))])
        )
        current[j] = [free.pop() for _ in range(c)]
        trainers.append(
            Trainer(j, n_min, n_max, table2_points(models[j % len(models)], n_max), c, 20.0, 5.0)
        )
    return trainers, pool, current


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--time-limit", type=float, default=10.0)
    args = ap.parse_args()
    warm, _, _ = instance(20, 3, 0)
    solve(warm, 20)  # import scipy/HiGHS once, outside the timings
    print("| nodes | jobs | formulation | median s | max s | max gap | status |")
    print("|---:|---:|---|---:|---:|---:|---|")
    for n_nodes, n_jobs in SIZES:
        forms = ["choices", "counts"] + (["nodes"] if n_nodes <= 500 else [])
        for form in forms:
            times, gaps, statuses = [], [], set()
            for seed in range(args.repeats):
                trainers, pool, current = instance(n_nodes, n_jobs, seed)
                r = solve(
                    trainers,
                    pool if form == "nodes" else len(pool),
                    120.0,
                    time_limit=args.time_limit,
                    formulation=form,  # type: ignore[arg-type]
                    current_nodes=current,
                )
                times.append(r.seconds)
                gaps.append(r.gap)
                statuses.add(r.status)
            print(
                f"| {n_nodes} | {n_jobs} | {form} | {statistics.median(times):.3f} | {max(times):.3f} "
                f"| {max(gaps):.1e} | {', '.join(sorted(statuses))} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
