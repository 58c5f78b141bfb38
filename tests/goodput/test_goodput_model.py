"""The goodput model's equations (Pollux Eq. 4-11) against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from goodput import (
    GoodputModel,
    GradParams,
    PerfParams,
    compute_time,
    statistical_efficiency,
    step_time,
    sync_time,
)

PERF = PerfParams(
    alpha_c=0.02, beta_c=0.001, alpha_n=0.2, beta_n=0.01, alpha_r=0.05, beta_r=0.002, gamma=2.0
)
GRAD = GradParams(sqr=1.0, var=4.0)  # phi = 4 * M0


def test_compute_time_is_linear_in_the_local_batch():
    assert compute_time(PERF, 100) == pytest.approx(0.02 + 0.1)
    assert np.allclose(compute_time(PERF, [0, 10]), [0.02, 0.03])


def test_sync_time_is_zero_alone_intra_node_on_one_node_inter_node_across_nodes():
    assert sync_time(PERF, 1, 1) == 0.0
    assert sync_time(PERF, 1, 2) == pytest.approx(0.05)  # K - 2 = 0
    assert sync_time(PERF, 1, 4) == pytest.approx(0.05 + 2 * 0.002)
    assert sync_time(PERF, 2, 4) == pytest.approx(0.2 + 2 * 0.01)
    assert np.allclose(sync_time(PERF, [1, 1, 4], [1, 3, 8]), [0.0, 0.052, 0.26])


def test_step_time_overlaps_compute_and_sync_with_gamma_and_adds_accumulation_passes():
    t_c, t_s = 0.02 + 0.001 * 64, 0.2 + 0.01 * 6
    expected = math.sqrt(t_c**2 + t_s**2)
    assert step_time(PERF, 2, 8, 64) == pytest.approx(expected)
    assert step_time(PERF, 2, 8, 64, accum_steps=3) == pytest.approx(3 * t_c + expected)
    assert step_time(PERF, 1, 1, 64) == pytest.approx(t_c)  # nothing to synchronise
    no_overlap = PerfParams(0.02, 0.001, 0.2, 0.01, 0.05, 0.002, gamma=1.0)
    assert step_time(no_overlap, 2, 8, 64) == pytest.approx(t_c + t_s)
    near_max = PerfParams(0.02, 0.001, 0.2, 0.01, 0.05, 0.002, gamma=10.0)
    assert step_time(near_max, 2, 8, 64) == pytest.approx(max(t_c, t_s), rel=1e-3)


def test_efficiency_is_one_at_the_initial_batch_and_decreasing_in_the_batch():
    m0 = 128
    assert statistical_efficiency(GRAD, m0, m0) == pytest.approx(1.0)
    phi = GRAD.noise_scale(m0)
    assert phi == pytest.approx(512.0)
    assert statistical_efficiency(GRAD, m0, 1024) == pytest.approx((phi + m0) / (phi + 1024))
    eff = statistical_efficiency(GRAD, m0, np.array([128, 256, 1024, 8192]))
    assert np.all(np.diff(eff) < 0) and np.all(eff > 0)


def test_one_batch_gets_exactly_what_an_array_of_batches_gets():
    grads = [
        GRAD,
        GradParams(sqr=0.0, var=1.0),
        GradParams(sqr=3.5e-4, var=0.0),
        GradParams(sqr=-1.0, var=2.0),
    ]
    batches = [32, 128, 200, 1000, 4096, 12345.5]
    for grad in grads:
        many = statistical_efficiency(grad, 128, np.array(batches, dtype=float))
        for i, b in enumerate(batches):
            one = statistical_efficiency(grad, 128, b)
            assert np.ndim(one) == 0
            assert float(one) == float(many[i]), (grad, b)  # bit for bit, not approximately


def test_efficiency_is_one_without_gradient_signal():
    assert statistical_efficiency(GradParams(sqr=0.0, var=1.0), 32, 4096) == 1.0
    assert GradParams(sqr=0.0, var=1.0).noise_scale(32) == math.inf


def test_goodput_is_throughput_times_efficiency():
    model = GoodputModel(PERF, GRAD, init_batch_size=128)
    thr = model.throughput(2, 8, 64, 1)
    assert thr == pytest.approx(8 * 64 * 2 / step_time(PERF, 2, 8, 64, 1))
    assert model.goodput(2, 8, 64, 1) == pytest.approx(thr * model.efficiency(1024))


def _brute_force(model: GoodputModel, nodes: int, replicas: int, max_bsz: int, hi: int) -> float:
    best = 0.0
    for atomic in range(1, hi + 1):
        for accum in range(0, 64):
            batch = replicas * atomic * (accum + 1)
            if batch < model.init_batch_size or batch > max_bsz:
                continue
            best = max(best, float(model.goodput(nodes, replicas, atomic, accum)))
    return best


def test_optimize_finds_near_the_best_batch_and_vectorises_over_placements():
    model = GoodputModel(PERF, GRAD, init_batch_size=128)
    nodes = np.array([1, 1, 2, 4])
    replicas = np.array([1, 4, 8, 16])
    good, local, accum = model.optimize(nodes, replicas, 4096, (16, 256), accumulation=True)
    assert good.shape == local.shape == accum.shape == (4,)
    for i in range(4):
        batch = replicas[i] * local[i] * (accum[i] + 1)
        assert 128 <= batch <= 4096 * (1 + 1e-9) + replicas[i] * (accum[i] + 1)
        assert 16 <= local[i] <= 256
        assert good[i] == pytest.approx(
            float(model.goodput(nodes[i], replicas[i], local[i], accum[i]))
        )
        # a 50-point grid: within 3 % of the best over every integer configuration
        assert good[i] >= 0.97 * _brute_force(model, nodes[i], replicas[i], 4096, 256)
    scalar = model.optimize(2, 8, 4096, (16, 256), accumulation=True)
    assert scalar.goodput == pytest.approx(good[2])


def test_optimize_without_accumulation_never_accumulates_and_respects_the_local_bound():
    model = GoodputModel(PERF, GradParams(sqr=0.01, var=10.0), init_batch_size=128)
    good, local, accum = model.optimize([1, 2], [1, 8], 4096, (16, 128))
    assert np.all(accum == 0) and np.all(local <= 128)
    # a very noisy gradient: efficiency stays high, so the batch grows to the bound
    assert local[1] == 128
    assert np.all(good > 0)


def test_optimize_defaults_to_the_initial_batch_and_rejects_a_smaller_maximum():
    model = GoodputModel(PERF, GRAD, init_batch_size=128)
    _, local, accum = model.optimize(1, 1)
    assert local == 128 and accum == 0
    with pytest.raises(ValueError, match="below the initial batch"):
        model.optimize(1, 1, max_batch_size=64)
    with pytest.raises(ValueError, match="num_nodes <= num_replicas"):
        model.optimize(3, 2, 4096)


def test_speedup_is_one_on_the_base_placement_and_the_ratio_of_best_goodputs():
    from goodput import speedup

    model = GoodputModel(PERF, GRAD, init_batch_size=128)
    args = (4096, (16, 256), True)
    assert speedup(model, 1, 1, *args) == pytest.approx(1.0)
    got = speedup(model, np.array([1, 2]), np.array([4, 8]), *args)
    base = model.optimize(1, 1, *args).goodput
    want = model.optimize(np.array([1, 2]), np.array([4, 8]), *args).goodput / base
    assert np.allclose(got, want) and np.all(got > 1)
    assert speedup(model, 2, 8, *args, base=(2, 8)) == pytest.approx(1.0)
