"""The exact round solver (ILP) against exhaustive enumeration, and the DP against it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from primal_dual.dp import CandidateCache, QueueEntry, plan_queue
from primal_dual.exact import round_optimum
from primal_dual.find_alloc import JobRequest, _make
from primal_dual.prices import PriceBounds


def placements(free: np.ndarray, w: int):
    """Every way to take exactly ``w`` GPUs from ``free``."""
    cells = [(h, k) for h in range(free.shape[0]) for k in range(free.shape[1]) if free[h, k] > 0]

    def rec(i, left, cur):
        if left == 0:
            yield cur.copy()
            return
        if i == len(cells):
            return
        h, k = cells[i]
        for t in range(min(left, free[h, k]), -1, -1):
            cur[h, k] = t
            yield from rec(i + 1, left - t, cur)
        cur[h, k] = 0

    yield from rec(0, w, np.zeros_like(free))


def exhaustive_optimum(entries, free, price) -> float:
    """Best total payoff over every subset of jobs and every placement of each."""
    best = 0.0

    def rec(i, f, total):
        nonlocal best
        if i == len(entries):
            best = max(best, total)
            return
        rec(i + 1, f, total)
        e = entries[i]
        for a in placements(f, e.request.num_gpus):
            kept = e.keep is not None and np.array_equal(a, e.keep)
            c = _make(a, e.request, price, kept=kept)
            if c is not None and e.payoff(c) > 0:
                rec(i + 1, f - a, total + e.payoff(c))

    rec(0, free, 0.0)
    return best


@st.composite
def rounds(draw):
    """A tiny round: 2-3 nodes x 2 types, fixed per-type prices, 1-4 jobs (some running)."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    nodes, types = int(rng.integers(2, 4)), 2
    cap = rng.integers(0, 3, size=(nodes, types))
    cap[0, 0] = max(cap[0, 0], 1)
    prices = rng.uniform(0.0, 0.5, types)
    cache = CandidateCache(cap, None, np.broadcast_to(prices, cap.shape))
    entries = []
    for j in range(draw(st.integers(1, 4))):
        w = int(rng.integers(1, 4))
        cons = np.tile(rng.uniform(0.5, 3.0, types), (nodes, 1))
        cons[rng.random(cons.shape) < 0.2] = 0
        unc = cons * rng.uniform(0.4, 1.2)  # measured tables have unconsolidated > consolidated too
        weight = rng.uniform(0.5, 3.0)
        keep = None
        if rng.random() < 0.3:
            options = list(placements(cap, w))
            keep = options[int(rng.integers(len(options)))] if options else None
        entries.append(
            QueueEntry(
                key=j,
                request=JobRequest(w, cons, unc),
                class_key=j,
                utility=lambda r, weight=weight: weight * r / (1.0 + r),
                hold_rounds=lambda r: 1.0 + 1.0 / r,
                keep=keep,
                kept_utility=(lambda r, weight=weight: 1.2 * weight * r / (1.0 + r))
                if keep is not None
                else None,
            )
        )
    return entries, cap.copy(), cache


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds())
def test_ilp_equals_exhaustive_optimum_and_bounds_the_dp(instance):
    entries, free, cache = instance
    best = round_optimum(entries, free, cache)
    assert best.total_payoff == pytest.approx(
        exhaustive_optimum(entries, free, cache.prices(free)), abs=1e-9
    )
    # its plan is feasible, and each payoff is the job's own at that placement
    used = sum((c.alloc for _, c, _ in best.chosen), np.zeros_like(free))
    assert (used <= free).all()
    for i, c, p in best.chosen:
        assert c.alloc.sum() == entries[i].request.num_gpus
        assert p == pytest.approx(entries[i].payoff(c)) and p > 0
    for beam in (1, 4, 10_000):
        assert plan_queue(entries, free, cache, beam=beam).total_payoff <= best.total_payoff + 1e-9


def test_the_dp_can_be_exact_and_below_the_optimum():
    """``DPResult.exact`` means no state was dropped (optimal over the DP's search: queue-order
    subsets, each job at FIND_ALLOC's best placement on what is left), not the round's optimum:
    job 0 takes the only V100, which job 1 alone can use, although K80 would do for job 0."""
    cap = np.array([[1, 1]])  # one node: a V100 and a K80
    cache = CandidateCache(cap, None, np.zeros((1, 2)))
    flexible = JobRequest(1, np.array([[2.0, 1.0]]), np.array([[2.0, 1.0]]))
    v100_only = JobRequest(1, np.array([[2.0, 0.0]]), np.array([[2.0, 0.0]]))
    entries = [
        QueueEntry(0, flexible, 0, lambda r: r, lambda r: 1.0),
        QueueEntry(1, v100_only, 1, lambda r: 1.5 * r, lambda r: 1.0),
    ]
    dp = plan_queue(entries, cap.copy(), cache, beam=10_000)
    best = round_optimum(entries, cap.copy(), cache)
    assert dp.exact and dp.total_payoff == pytest.approx(3.0)  # job 1 alone on the V100
    assert best.total_payoff == pytest.approx(4.0)  # job 0 on the K80, job 1 on the V100
    assert [(i, c.alloc.tolist()) for i, c, _ in best.chosen] == [(0, [[0, 1]]), (1, [[1, 0]])]


def test_state_dependent_prices_are_refused():
    cap = np.array([[2, 2]])
    cache = CandidateCache(cap, PriceBounds(np.array([0.1, 0.1]), np.array([1.0, 1.0])))
    entry = QueueEntry(
        0, JobRequest(1, np.ones((1, 2)), np.ones((1, 2))), 0, lambda r: r, lambda r: 1.0
    )
    with pytest.raises(ValueError, match="fixed prices"):
        round_optimum([entry], cap.copy(), cache)
