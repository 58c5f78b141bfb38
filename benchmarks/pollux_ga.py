"""Reference genetic algorithm for PolluxSched (the paper's search, §4.3), for benchmarks only.

A population of allocation matrices ``[job, node]`` (one GPU type) is perturbed and combined,
then repaired to satisfy the node capacities, the jobs' GPU limits and interference avoidance
(at most one distributed job per node); the allocation with the highest FITNESS_p wins. As in
Pollux's implementation: the population starts from the current allocation, single-point
crossover over jobs, mutations that reset a job to its current allocation, zero some of its
cells or raise some cells, population 100, 100 generations, survivors by fitness (elitist).
The needless-split rule is *not* imposed here: the GA searches a superset of what the
production solver (``pollux.solver``) may choose.
"""

from __future__ import annotations

import numpy as np

from pollux.problem import AllocationProblem, fitness


def _max_k(problem: AllocationProblem) -> np.ndarray:
    ok = np.isfinite(problem.local[:, 0]) | np.isfinite(problem.spread[:, 0])
    ok[:, 0] = True
    return np.array([int(np.flatnonzero(row).max()) for row in ok])


def _repair(problem: AllocationProblem, pop: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    cap = problem.capacity[:, 0]
    pop = np.clip(pop, 0, cap[None, None, :])
    # Interference: a node keeps only the first distributed job that uses it.
    distributed = np.count_nonzero(pop, axis=2) > 1
    mask = (pop > 0) & distributed[:, :, None]
    pop[np.cumsum(mask, axis=1) > 1] = 0
    # GPU limit per job, filled in a random node order.
    shuffle = np.argsort(rng.random(pop.shape), axis=2)
    pop = np.take_along_axis(pop, shuffle, axis=2)
    pop = np.diff(
        np.minimum(np.cumsum(pop, axis=2), _max_k(problem)[None, :, None]), axis=2, prepend=0
    )
    pop = np.take_along_axis(pop, np.argsort(shuffle, axis=2), axis=2)
    # Node capacity, first jobs first.
    pop = np.diff(np.minimum(np.cumsum(pop, axis=1), cap[None, None, :]), axis=1, prepend=0)
    return pop


def _mutate(problem: AllocationProblem, pop: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    base = problem.current[:, :, 0]
    reset = rng.random(pop.shape[:2]) < 0.1
    pop = np.where(reset[:, :, None], base[None], pop)
    zero_rows = rng.random(pop.shape[:2]) < 0.1
    pop[(rng.random(pop.shape) < 0.1) & zero_rows[:, :, None]] = 0
    free = problem.capacity[None, :, 0] - pop.sum(axis=1)  # [pop, node]
    can = free[:, None, :] > 0
    p1 = can / np.maximum(can.sum(axis=2, keepdims=True), 1)
    held = (pop > 0) & can
    p2 = held / np.maximum(held.sum(axis=2, keepdims=True), 1)
    hit = rng.random(pop.shape) < p1 + p2 - p1 * p2
    raised = rng.integers(pop, problem.capacity[None, None, :, 0] + 1)
    return np.where(hit, raised, pop)


def _crossover(pop: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    n, jobs = pop.shape[0], pop.shape[1]
    a, b = rng.integers(n, size=n), rng.integers(n, size=n)
    point = rng.integers(jobs + 1, size=n)
    take_a = np.arange(jobs)[None, :] < point[:, None]
    children: np.ndarray = np.where(take_a[:, :, None], pop[a], pop[b])
    return children


def genetic_search(
    problem: AllocationProblem, seed: int = 0, pop_size: int = 100, generations: int = 100
) -> np.ndarray:
    """The best ``[job, node, 1]`` allocation found (one GPU type only)."""
    if problem.capacity.shape[1] != 1:
        raise ValueError("the reference GA handles one GPU type")
    rng = np.random.default_rng(seed)

    def score(p: np.ndarray) -> np.ndarray:
        return np.asarray(fitness(problem, p[..., None]))  # one FITNESS_p per member

    pop = np.repeat(problem.current[None, :, :, 0], pop_size, axis=0)
    pop = _repair(problem, _mutate(problem, pop, rng), rng)
    pop[0] = problem.current[:, :, 0]
    fit = score(pop)
    for _ in range(generations):
        children = _repair(problem, _mutate(problem, _crossover(pop, rng), rng), rng)
        both = np.concatenate([pop, children])
        both_fit = np.concatenate([fit, score(children)])
        keep = np.argsort(-both_fit, kind="stable")[:pop_size]
        pop, fit = both[keep], both_fit[keep]
    best: np.ndarray = pop[0][..., None]
    return best
