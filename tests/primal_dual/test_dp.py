"""Algorithm 2's DP against brute force over all subsets on small random instances."""

import itertools

import numpy as np
import pytest

from primal_dual.dp import CandidateCache, QueueEntry, plan_queue
from primal_dual.find_alloc import JobRequest
from primal_dual.prices import PriceBounds


def brute_force(entries, free, cache):
    best = 0.0
    for r in range(len(entries) + 1):
        for subset in itertools.combinations(range(len(entries)), r):
            state, total, ok = free.copy(), 0.0, True
            for i in subset:  # in queue order, each takes FIND_ALLOC's best allocation
                b = cache.best(entries[i], state)
                if b is None:
                    ok = False
                    break
                state = state - b[0].alloc
                total += b[1]
            if ok:
                best = max(best, total)
    return best


def random_instance(rng, n_jobs):
    nodes, types = rng.integers(2, 4), 2
    cap = rng.integers(1, 4, size=(nodes, types))
    cap[rng.random(cap.shape) < 0.3] = 0
    cap[0, 0] = max(cap[0, 0], 1)
    free = cap - rng.integers(0, 2, size=cap.shape).clip(0, cap)
    bounds = PriceBounds(u_min=rng.uniform(0.01, 0.1, types), u_max=rng.uniform(0.5, 3.0, types))
    entries = []
    for j in range(n_jobs):
        w = int(rng.integers(1, 4))
        rates = np.tile(rng.uniform(0.5, 3.0, types), (nodes, 1))
        weight = rng.uniform(0.5, 3.0)
        entries.append(
            QueueEntry(
                key=j,
                request=JobRequest(w, rates, rates * rng.uniform(0.4, 1.0)),
                class_key=j,
                utility=lambda rate, weight=weight: weight * rate / (1.0 + rate),
                hold_rounds=lambda rate: 1.0,
            )
        )
    return entries, free, CandidateCache(cap, bounds)


@pytest.mark.parametrize("seed", range(40))
def test_dp_total_payoff_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    entries, free, cache = random_instance(rng, int(rng.integers(1, 7)))
    result = plan_queue(entries, free, cache, beam=10_000)
    assert result.exact
    assert result.total_payoff == pytest.approx(brute_force(entries, free, cache), abs=1e-9)
    # the chosen allocations are feasible together and each has a positive payoff
    used = sum((c.alloc for _, c, _ in result.chosen), np.zeros_like(free))
    assert (used <= free).all()
    assert all(p > 0 for _, _, p in result.chosen)
    assert sum(p for _, _, p in result.chosen) == pytest.approx(result.total_payoff)


def test_dp_reports_inexact_when_the_beam_drops_states():
    rng = np.random.default_rng(7)
    entries, free, cache = random_instance(rng, 6)
    wide = plan_queue(entries, free, cache, beam=10_000)
    narrow = plan_queue(entries, free, cache, beam=1)
    assert wide.peak_frontier > 1  # this instance branches...
    assert not narrow.exact  # ...so a beam of one must drop states and say so
    assert narrow.total_payoff <= wide.total_payoff + 1e-12
    with pytest.raises(ValueError):
        plan_queue(entries, free, cache, beam=0)


def test_incremental_prices_equal_a_full_recompute():
    from primal_dual.prices import price_matrix

    rng = np.random.default_rng(11)
    cap = rng.integers(0, 5, size=(30, 3))
    bounds = PriceBounds(u_min=np.array([1e-6, 1e-4, 1e-3]), u_max=np.array([1.0, 0.5, 2.0]))
    cache = CandidateCache(cap, bounds)
    free = cap.copy()
    for _ in range(50):
        h, k = rng.integers(0, 30), rng.integers(0, 3)
        if free[h, k] > 0:
            free = free.copy()
            free[h, k] -= 1
        np.testing.assert_allclose(cache.prices(free), price_matrix(bounds, cap - free, cap))


@pytest.mark.parametrize("seed", range(10))
def test_payoffs_remembered_per_candidate_object_pick_the_same_best(seed):
    """The DP computes each candidate object's payoff once per job; the pick (ties: first) is
    best_candidate's on every state."""
    from primal_dual.dp import _best_known
    from primal_dual.find_alloc import Candidate, best_candidate

    rng = np.random.default_rng(seed)
    pool = [
        Candidate(np.eye(3, dtype=np.int64)[i % 3].reshape(1, 3), float(r), float(c), 1)
        for i, (r, c) in enumerate(rng.choice([0.5, 1.0, 2.0], size=(8, 2)))
    ]
    calls = []
    entry = QueueEntry(
        0,
        JobRequest(1, np.ones((1, 3)), np.ones((1, 3))),
        0,
        lambda r: calls.append(r) or 3.0 * r,
        lambda r: 1.0,
    )
    known: dict = {}
    memo_calls = 0
    for _ in range(30):  # states sharing candidate objects
        cands = [pool[int(k)] for k in rng.integers(0, len(pool), size=int(rng.integers(0, 5)))]
        before = len(calls)
        got = _best_known(cands, entry, known)
        memo_calls += len(calls) - before
        assert got == best_candidate(cands, entry.payoff)
    assert memo_calls == len(known) <= len(pool)  # one payoff per candidate object
