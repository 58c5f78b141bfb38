"""PolluxSched's production solver against the reference genetic algorithm (issue 24).

Random rounds: ``--jobs`` jobs on ``--nodes`` nodes of 4 GPUs of one type. Each job gets an
iteration-time model of Pollux's form (Eq. 8-11: compute linear in the local batch, intra- and
inter-node synchronisation with retrogression, overlap gamma) with parameters drawn from the
ranges of the six Pollux applications, a gradient noise scale, an initial batch M0 and a
maximum batch 32 x M0 (§3.1), a GPU limit (twice its largest allocation so far, §4.1), an age
and a re-allocation count (REALLOC_FACTOR, δ = 30 s). The round's current allocation is the
solver's answer to the previous round (the same jobs, a minute younger, a few new ones), so
most jobs hold GPUs, as in a running cluster. Fitness is FITNESS_{-1} (Eq. 14).

    .venv/bin/python benchmarks/bench_pollux_solver.py                 # 64 GPUs / 160 and 16, 40 jobs, vs the GA
    .venv/bin/python benchmarks/bench_pollux_solver.py --speed-only --nodes 256 --jobs 2000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from pollux_ga import genetic_search  # noqa: E402

from pollux.fitness import fair_share_gpus, realloc_factor  # noqa: E402
from pollux.problem import AllocationProblem, fitness, violations  # noqa: E402
from pollux.solver import solve  # noqa: E402

NODE_SIZE = 4


def _best_goodput(rng: np.random.Generator, jobs: int, width: int) -> list[np.ndarray]:
    """Per job, best goodput over batch sizes for K = 0..width-1 GPUs, local and spread."""
    a_c = rng.uniform(0.005, 0.2, jobs)[:, None, None]
    b_c = rng.uniform(2e-4, 5e-3, jobs)[:, None, None]
    a_r = rng.uniform(0.002, 0.1, jobs)[:, None, None]
    a_n = a_r * rng.uniform(1.2, 8.0, jobs)[:, None, None]
    beta = rng.uniform(0.0, 0.01, jobs)[:, None, None]
    gamma = rng.uniform(1.0, 3.0, jobs)[:, None, None]
    m0 = rng.choice([8, 12, 20, 128, 200, 256], jobs)[:, None, None].astype(float)
    phi = m0 * rng.uniform(0.5, 40.0, jobs)[:, None, None]
    k = np.maximum(np.arange(width), 1)[None, :, None].astype(float)
    batch = m0 * np.geomspace(1.0, 32.0, 24)[None, None, :]
    batch = np.maximum(batch, k)  # at least one sample per GPU
    m = batch / k
    out: list[np.ndarray] = []
    for alpha in (a_r, a_n):
        sync = np.where(k > 1, alpha + beta * np.maximum(k - 2, 0), 0.0)
        t = ((a_c + b_c * m) ** gamma + sync**gamma) ** (1 / gamma)
        good = batch / t * (phi + m0) / (phi + batch)
        out.append(good.max(axis=2))
    return out  # local, spread: [job, K]


def random_round(rng: np.random.Generator, nodes: int, jobs: int) -> AllocationProblem:
    width = min(nodes * NODE_SIZE, 64) + 1
    local_g, spread_g = _best_goodput(rng, jobs, width)
    fair = fair_share_gpus(nodes * NODE_SIZE, jobs)
    fair_nodes = -(-fair // NODE_SIZE)
    base = (local_g if fair_nodes == 1 else spread_g)[:, min(fair, width - 1)]
    k = np.arange(width)
    max_k = np.minimum(2 ** rng.integers(0, 7, jobs), width - 1)
    allowed = (k[None, :] >= 1) & (k[None, :] <= max_k[:, None])
    local = np.where(allowed & (k[None, :] <= NODE_SIZE), local_g / base[:, None], np.nan)
    spread = np.where(allowed & (k[None, :] >= 2), spread_g / base[:, None], np.nan)
    local[:, 0] = spread[:, 0] = 0.0
    age = rng.uniform(0, 4 * 3600, jobs)
    restarts = rng.integers(0, 10, jobs)
    cap = np.full((nodes, 1), NODE_SIZE)
    zero = np.zeros((jobs, nodes, 1), dtype=np.int64)
    first = AllocationProblem(
        cap, local[:, None], spread[:, None], zero, realloc_factor(age, restarts)
    )
    current = solve(first)
    # A minute later: a few new jobs arrived (they hold nothing yet), the rest keep their GPUs.
    new = rng.random(jobs) < 0.1
    current[new] = 0
    age = np.where(new, rng.uniform(0, 60, jobs), age + 60)
    return AllocationProblem(
        cap, local[:, None], spread[:, None], current, realloc_factor(age, restarts)
    )


T = TypeVar("T")


def timed(fn: Callable[..., T], *args: Any) -> tuple[T, float]:
    """Result and CPU seconds (``time.process_time``: steadier than wall time on a shared
    machine)."""
    t0 = time.process_time()
    out = fn(*args)
    return out, time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--jobs", type=int, nargs="+", default=[160, 40, 16])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--generations", type=int, default=100)
    ap.add_argument("--speed-only", action="store_true")
    args = ap.parse_args()
    print(
        "| GPUs | jobs | rounds | solver CPU s/round (median, max) | GA CPU s/round | solver/GA fitness (median, min) | rounds GA better |"
    )
    print("|---|---|---|---|---|---|---|")
    for jobs in args.jobs:
        rng = np.random.default_rng(jobs)
        ours_t, ga_t, ratios = [], [], []
        for r in range(args.rounds):
            problem = random_round(rng, args.nodes, jobs)
            alloc, t = timed(solve, problem)
            assert not violations(problem, alloc), violations(problem, alloc)
            ours_t.append(t)
            if args.speed_only:
                continue
            ga, tg = timed(genetic_search, problem, r, 100, args.generations)
            ga_t.append(tg)
            ratios.append(float(fitness(problem, alloc) / fitness(problem, ga)))
        ga_col = f"{statistics.median(ga_t):.2f}" if ga_t else "-"
        ratio_col = f"{statistics.median(ratios):.4f}, {min(ratios):.4f}" if ratios else "-"
        worse = sum(x < 1 for x in ratios) if ratios else "-"
        print(
            f"| {args.nodes * NODE_SIZE} | {jobs} | {args.rounds} | "
            f"{statistics.median(ours_t):.3f}, {max(ours_t):.3f} | {ga_col} | {ratio_col} | {worse} |"
        )


if __name__ == "__main__":
    main()
