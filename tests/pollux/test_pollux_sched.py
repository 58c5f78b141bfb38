"""PolluxSched's pure parts: fitness (Eq. 14-15), REALLOC_FACTOR, speedup tables, the placement
rules and the production solver (exact counts, packing, fill) against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pollux.fitness import (
    fair_share_gpus,
    fitness_from_utility,
    power_mean,
    realloc_factor,
    utility,
)
from pollux.problem import AllocationProblem, fitness, speedups, total_utility, violations
from pollux.solver import _Packer, best_counts, solve
from pollux.speedup import fair_goodput, speedup_row


def _problem(local, spread=None, nodes=2, node_size=4, current=None, factor=None, p=-1.0):
    local = np.asarray(local, dtype=float)
    jobs = local.shape[0]
    spread = local if spread is None else np.asarray(spread, dtype=float)
    cap = np.full((nodes, 1), node_size)
    cur = np.zeros((jobs, nodes, 1), dtype=np.int64) if current is None else current
    fac = np.ones(jobs) if factor is None else np.asarray(factor, dtype=float)
    return AllocationProblem(cap, local[:, None, :], spread[:, None, :], cur, fac, p=p)


def test_power_mean_is_the_generalised_mean_and_utility_ranks_alike():
    s = np.array([1.0, 2.0, 4.0])
    assert power_mean(s, p=1, eps=0) == pytest.approx(7 / 3)
    assert power_mean(s, p=-1, eps=0) == pytest.approx(3 / (1 + 0.5 + 0.25))
    assert power_mean(s, p=0, eps=0) == pytest.approx(2.0)
    for p in (-1.0, 0.0, 2.0):
        assert fitness_from_utility(float(utility(s, p).sum()), 3, p) == pytest.approx(
            float(power_mean(s, p))
        )
    # One job without GPUs drags the harmonic mean towards 0 whatever the others get.
    assert power_mean(np.array([0.0, 100.0]), p=-1) < power_mean(np.array([0.5, 0.5]), p=-1)


def test_realloc_factor_follows_the_paper():
    # (T - R δ) / (T + δ): a job 600 s old with 2 re-allocations, δ = 30 s.
    assert realloc_factor(600.0, 2) == pytest.approx((600 - 60) / 630)
    assert realloc_factor(0.0, 0) == 0.0
    assert realloc_factor(10.0, 5) == 0.0  # clamped, never negative


def test_without_a_reallocation_delay_nothing_is_discounted():
    with np.errstate(all="raise"):  # no 0 / 0 for a new job
        got = realloc_factor(np.array([0.0, 10.0, 600.0]), np.array([0, 3, 2]), 0.0)
    assert got.tolist() == [1.0, 1.0, 1.0]


def test_fair_share_rounds_up():
    assert fair_share_gpus(64, 160) == 1
    assert fair_share_gpus(64, 10) == 7
    assert fair_share_gpus(64, 0) == 64


def test_speedup_row_is_goodput_over_fair_share():
    def good(nodes, k):  # 10 samples/s per GPU, 20 % lost across nodes
        return np.where(nodes > 1, 8.0, 10.0) * k

    base = fair_goodput(good, fair_gpus=2, node_size=4)
    assert base == 20.0
    local, spread = speedup_row(good, base, max_k=6, width=9, node_size=4)
    assert local[2] == pytest.approx(1.0) and local[4] == pytest.approx(2.0)
    assert np.isnan(local[5])  # five GPUs do not fit one node
    assert spread[6] == pytest.approx(6 * 8 / 20)
    assert np.isnan(spread[1]) and np.isnan(spread[7])
    assert fair_goodput(good, fair_gpus=6, node_size=4) == 48.0  # two nodes


def test_speedups_apply_the_realloc_factor_only_to_changed_allocations():
    local = [[0, 1, 2, 2.5, 3], [0, 1, 1.5, 1.8, 2]]
    current = np.zeros((2, 2, 1), dtype=np.int64)
    current[0, 0, 0] = 2
    prob = _problem(local, current=current, factor=[0.5, 0.25])
    same = current.copy()
    same[1, 1, 0] = 1
    assert list(speedups(prob, same)) == [2.0, 0.25]
    moved = np.zeros_like(current)
    moved[0, 1, 0] = 2  # same count, other node: a re-allocation
    assert speedups(prob, moved)[0] == pytest.approx(1.0)


def test_violations_name_interference_and_needless_splits():
    k = np.arange(9)
    local = np.where(k <= 4, k, np.nan)[None].repeat(3, axis=0)
    spread = np.where(k >= 2, k * 0.8, np.nan)[None].repeat(3, axis=0)
    prob = _problem(local, spread, nodes=3)
    alloc = np.zeros((3, 3, 1), dtype=np.int64)
    alloc[0, 0, 0], alloc[0, 1, 0] = 3, 3  # distributed, 6 GPUs on 2 nodes: fine
    alloc[1, 1, 0], alloc[1, 2, 0] = 1, 1  # distributed too, shares node 1
    assert any("node 1 shared by 2 distributed jobs" in v for v in violations(prob, alloc))
    assert any("job 1 split over 2 nodes needlessly" in v for v in violations(prob, alloc))
    alloc[1] = 0
    alloc[1, 2, 0] = 2
    assert violations(prob, alloc) == []


def test_best_counts_is_exact():
    rng = np.random.default_rng(3)
    for _ in range(20):
        u = -1.0 / (rng.random((4, 6)) + 1e-3)
        u[rng.random((4, 6)) < 0.2] = -np.inf
        u[:, 0] = -1000.0
        supply = int(rng.integers(2, 12))
        counts = best_counts(u, supply)
        assert counts.sum() <= supply and np.all(np.isfinite(u[np.arange(4), counts]))
        brute = max(
            sum(u[j, c[j]] for j in range(4))
            for c in itertools.product(range(6), repeat=4)
            if sum(c) <= supply
        )
        assert u[np.arange(4), counts].sum() == pytest.approx(brute)


def _brute_force(prob: AllocationProblem) -> float:
    """Best Σ utility over every allocation of a tiny problem (no rule checks skipped)."""
    jobs, nodes, _ = prob.current.shape
    cells = [c for c in itertools.product(range(int(prob.capacity.max()) + 1), repeat=nodes)]
    best = -np.inf
    for combo in itertools.product(cells, repeat=jobs):
        alloc = np.array(combo)[:, :, None]
        if violations(prob, alloc):
            continue
        best = max(best, float(total_utility(prob, alloc)))
    return best


def test_solver_matches_brute_force_on_small_rounds():
    rng = np.random.default_rng(7)
    k = np.arange(5)
    for _ in range(12):
        jobs = 3
        good = np.cumsum(rng.uniform(0.2, 1.0, (jobs, 5)), axis=1) - 0  # increasing in K
        good[:, 0] = 0
        local = np.where(k <= 2, good, np.nan)
        spread = np.where(k >= 2, good * rng.uniform(0.5, 0.95, (jobs, 1)), np.nan)
        spread[:, 0] = 0
        current = np.zeros((jobs, 2, 1), dtype=np.int64)
        current[0, 0, 0] = 1
        prob = _problem(
            local, spread, nodes=2, node_size=2, current=current, factor=rng.uniform(0.3, 1.0, jobs)
        )
        alloc = solve(prob)
        assert violations(prob, alloc) == []
        assert float(total_utility(prob, alloc)) == pytest.approx(_brute_force(prob), rel=1e-9)


def test_solver_keeps_placements_spreads_large_jobs_and_leaves_no_useful_gpu_idle():
    k = np.arange(9)
    scale = np.where(k >= 1, k, 0).astype(float)
    local = np.where(k <= 4, scale, np.nan)[None].repeat(3, axis=0)
    spread = np.where(k >= 2, scale * 0.9, np.nan)[None].repeat(3, axis=0)
    current = np.zeros((3, 4, 1), dtype=np.int64)
    current[2, 3, 0] = 2  # job 2 runs on node 3
    prob = _problem(local, spread, nodes=4, current=current, factor=[0.9, 0.9, 0.2])
    alloc = solve(prob)
    assert violations(prob, alloc) == []
    assert alloc.sum() == 16  # every GPU is worth something to someone
    assert alloc[2, 3, 0] >= 2  # the low-factor job is not moved off its node
    # Jobs whose count changed were re-placed; a distributed one spans the fewest nodes.
    for j in range(3):
        count = alloc[j].sum()
        assert np.count_nonzero(alloc[j]) == -(-count // 4)


def test_solver_places_each_job_on_one_type_and_uses_both_types():
    k = np.arange(5)
    jobs = 6
    local = np.where(k <= 2, k, np.nan).astype(float)[None, None].repeat(jobs, 0).repeat(2, 1)
    local[:, 1] *= 0.5  # the second type is half as fast for everyone
    spread = np.where(k >= 2, local * 0.7, np.nan)
    spread[..., 0] = 0
    cap = np.array([[2, 0], [2, 0], [0, 2], [0, 2]])
    prob = AllocationProblem(
        cap, local, spread, np.zeros((jobs, 4, 2), dtype=np.int64), np.ones(jobs)
    )
    alloc = solve(prob)
    assert violations(prob, alloc) == []
    assert alloc[:, :, 0].sum() == 4 and alloc[:, :, 1].sum() == 4
    assert np.all(np.count_nonzero(alloc.sum(axis=1), axis=1) <= 1)
    assert fitness(prob, alloc) > 0.4  # every job got a GPU (harmonic mean, no zero)


def test_a_local_job_beside_a_distributed_one_cannot_spread_over_its_node():
    packer = _Packer(np.array([4, 4, 4]), 4)
    packer.take(np.array([4, 2, 0]))  # a distributed job on nodes 0-1
    own = np.array([0, 2, 0])  # a local job beside it on node 1
    packer.take(own)
    assert packer.feasible(6, own) is None  # node 1 already hosts a distributed job
    assert list(packer.feasible(4, own)) == [0, 0, 4]
    mover = np.array([4, 2, 0])  # the distributed job itself may regrow over its nodes
    assert list(packer.feasible(8, mover)) == [4, 0, 4]
