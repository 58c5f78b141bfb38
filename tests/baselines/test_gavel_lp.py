"""Gavel's allocation LPs on tiny instances solved by hand."""

from __future__ import annotations

import numpy as np
import pytest

from baselines.gavel_lp import (
    equal_share_throughput,
    max_min_fairness,
    min_makespan,
    runnable_mask,
    solve_level_lp,
)


def test_max_min_two_jobs_two_types_by_hand():
    # Types A, B with one GPU each; 1-GPU jobs with throughputs T = [[2, 1], [4, 1]].
    # T_equal = T @ (1/2, 1/2) = [1.5, 2.5]. Maximise t s.t.
    #   (2 x11 + x12) / 1.5 >= t,  (4 x21 + x22) / 2.5 >= t,
    #   x11 + x12 <= 1, x21 + x22 <= 1, x11 + x21 <= 1, x12 + x22 <= 1.
    # Dual certificate: weights 3/7 and 1/7 on the two level rows (1.5*3/7 + 2.5*1/7 = 1) and
    # prices pA = 4/7, pB = 1/7, q1 = 2/7, q2 = 0 on A, B and job 1's time row satisfy
    # 2*3/7 <= pA + q1, 1*3/7 <= pB + q1, 4*1/7 <= pA + q2, 1*1/7 <= pB + q2 with equality, and
    # pA + pB + q1 + q2 = 1, so t <= 1. Complementary slackness forces every row tight:
    # x11 + x12 = x11 + x21 = x12 + x22 = 1 and 1 + x11 = 1.5, hence x = [[.5, .5], [.5, .5]].
    r = max_min_fairness(np.array([[2.0, 1.0], [4.0, 1.0]]), np.array([1, 1]), np.array([1, 1]))
    assert r.level == pytest.approx(1.0, abs=1e-7)
    assert r.x == pytest.approx(np.full((2, 2), 0.5), abs=1e-7)


def test_max_min_scale_factor_gives_equal_gpu_time():
    # One type with 2 GPUs; job A needs 1 GPU, job B 2 GPUs, equal throughputs (T_equal = 1).
    # With Gavel's scale factor in the objective: x_A >= t, 2 x_B >= t, x_A + 2 x_B <= 2
    #   -> t = 1, x_A = 1, x_B = 0.5: both get one GPU-second per second.
    r = max_min_fairness(np.array([[1.0], [1.0]]), np.array([1, 2]), np.array([2]))
    assert r.level == pytest.approx(1.0)
    assert r.x[:, 0] == pytest.approx([1.0, 0.5])
    # Without it: x_A >= t, x_B >= t, x_A + 2 x_B <= 2 -> t = 2/3 = x_A = x_B.
    r = max_min_fairness(
        np.array([[1.0], [1.0]]), np.array([1, 2]), np.array([2]), scale_in_objective=False
    )
    assert r.level == pytest.approx(2 / 3)
    assert r.x[:, 0] == pytest.approx([2 / 3, 2 / 3])


def test_max_min_priority_weight_halves_the_share():
    # One type, one GPU, two equal 1-GPU jobs; weight 2 on job 0 means (T x0)/2 >= t:
    # x0 / 2 >= t, x1 >= t, x0 + x1 <= 1 -> t = 1/3, x0 = 2/3, x1 = 1/3.
    # (Gavel divides by w_j, as written in its paper's objective.)
    r = max_min_fairness(
        np.array([[1.0], [1.0]]), np.array([1, 1]), np.array([1]), weights=np.array([2.0, 1.0])
    )
    assert r.level == pytest.approx(1 / 3)
    assert r.x[:, 0] == pytest.approx([2 / 3, 1 / 3])


def test_min_makespan_by_hand():
    # One GPU; job 0 does 2 steps/s and has 4 steps left, job 1 does 1 step/s with 2 left.
    # Finish both by M: 2 x0 >= 4/M, x1 >= 2/M, x0 + x1 <= 1 -> 2/M + 2/M <= 1 -> M = 4.
    r = min_makespan(
        np.array([[2.0], [1.0]]), np.array([1, 1]), np.array([1]), np.array([4.0, 2.0])
    )
    assert 1 / r.level == pytest.approx(4.0)
    assert r.x[:, 0] == pytest.approx([0.5, 0.5])


def test_equal_share_is_count_weighted():
    T = np.array([[3.0, 1.0]])
    assert equal_share_throughput(T, np.array([1, 3])) == pytest.approx([1.5])


def test_jobs_that_cannot_run_get_nothing_and_do_not_pin_the_level():
    # Job 1 needs 4 GPUs but each type has 2; job 2 has zero throughput everywhere.
    T = np.array([[1.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    r = solve_level_lp(T, np.ones(3), np.array([1, 4, 1]), np.array([2, 2]))
    assert r.x[1].sum() == 0 and r.x[2].sum() == 0
    assert r.level == pytest.approx(1.0)  # job 0 alone: all its time, on either type


def test_capacity_and_time_constraints_hold_on_a_random_instance():
    rng = np.random.default_rng(3)
    T = rng.uniform(0.0, 5.0, (40, 3))
    T[rng.random(T.shape) < 0.1] = 0.0
    W = rng.choice([1, 2, 4, 8], 40)
    counts = np.array([6, 4, 8])
    r = max_min_fairness(T, W, counts)
    assert (r.x >= 0).all() and (r.x <= 1).all()
    assert (r.x.sum(axis=1) <= 1 + 1e-7).all()
    assert ((W[:, None] * r.x).sum(axis=0) <= counts + 1e-6).all()
    assert (r.x[T == 0] == 0).all()
    t_eq = equal_share_throughput(T, counts)
    level = W * (T * r.x).sum(axis=1) / t_eq
    can_run = runnable_mask(T, W, counts).any(axis=1)
    assert level[can_run].min() == pytest.approx(r.level, rel=1e-6)
