"""Themis as Gavel's finish-time fairness (baselines/themis.py): the bisection finds the min-max
rho a brute-force search finds, the isolated share is Gavel's, and the policy runs."""

from __future__ import annotations

import numpy as np

from baselines.themis import ThemisPolicy, finish_time_fairness, isolated_throughput
from hadar.api import simulate


def _rho(T, x, R, t, D):
    thr = (T * x).sum(axis=1)
    return ((t + R / thr) / D).max()


def test_min_max_rho_matches_a_grid_search_on_two_jobs():
    T = np.array([[1.0], [2.0]])
    W = np.array([1.0, 1.0])
    counts = np.array([1.0])
    R = np.array([1.0, 6.0])
    t = np.array([4.0, 0.0])  # job 0 has waited: it needs more than half the GPU
    done = np.zeros(2)
    res = finish_time_fairness(T, W, counts, R, t, done, tolerance=1e-4)
    D = done + R / isolated_throughput(T, W, counts)
    grid = np.linspace(0.001, 0.999, 4000)
    best = min(_rho(T, np.array([[a], [1 - a]]), R, t, D) for a in grid)
    assert abs(res.level - best) <= 1e-3 * best
    assert abs(_rho(T, res.x, R, t, D) - res.level) <= 1e-6 * best
    assert res.x[0, 0] > 0.5


def test_isolated_share_is_an_nth_of_every_type():
    T = np.array([[1.0, 4.0], [2.0, 0.0]])
    W = np.array([1.0, 2.0])
    counts = np.array([4.0, 2.0])
    # Job 0: 4/2 = 2 GPUs of type 0 and 1 of type 1 as time fractions 2 and 1 -> scaled to
    # 2/3 and 1/3. Job 1 (W = 2): type 0 only (rate 0 on type 1): fraction 4/(2*2) = 1.
    assert np.allclose(isolated_throughput(T, W, counts), [2 / 3 + 4 / 3, 2.0])


def test_the_policy_runs_and_keeps_its_isolated_time_in_its_state():
    result = simulate(policy="themis", workload="philly-12", seed=1)
    assert result.summary["completed"] == 12
    policy = ThemisPolicy()
    state = policy.state()
    assert state["isolated"] == {} and state["last"] == {}
    policy.restore({**state, "isolated": {"3": 2.5}, "last": {"3": [10.0, 1.0]}})
    assert policy.state()["isolated"] == {"3": 2.5}
