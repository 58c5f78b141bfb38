"""Fitting the iteration-time model recovers known parameters and reports its own error."""

from __future__ import annotations

import numpy as np
import pytest

from goodput import PerfParams, compute_time, fit_perf_params, step_time

TRUE = PerfParams(
    alpha_c=0.03, beta_c=0.002, alpha_n=0.25, beta_n=0.008, alpha_r=0.06, beta_r=0.003, gamma=1.8
)


def _grid() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    nodes, replicas, bsz = [], [], []
    for n, k in [(1, 1), (1, 2), (1, 3), (1, 4), (2, 2), (2, 4), (2, 8), (4, 16), (8, 32)]:
        for m in (16, 32, 64, 128):
            nodes.append(n)
            replicas.append(k)
            bsz.append(m)
    return np.array(nodes), np.array(replicas), np.array(bsz)


def test_fit_recovers_known_parameters_from_exact_data():
    nodes, replicas, bsz = _grid()
    t_step = step_time(TRUE, nodes, replicas, bsz)
    t_comp = compute_time(TRUE, bsz)
    fit = fit_perf_params(nodes, replicas, bsz, t_step, t_comp)
    assert fit.converged and fit.num_points == nodes.size
    assert fit.median_rel_error < 1e-3 and fit.max_rel_error < 0.02
    got, want = fit.params.as_array(), TRUE.as_array()
    assert np.allclose(got[:2], want[:2], rtol=0.01)  # compute: identified exactly
    assert np.allclose(got[2:], want[2:], rtol=0.1)


def test_fit_reports_its_error_on_noisy_data():
    nodes, replicas, bsz = _grid()
    rng = np.random.default_rng(7)
    noise = rng.lognormal(0.0, 0.05, size=nodes.size)
    t_step = step_time(TRUE, nodes, replicas, bsz) * noise
    t_comp = compute_time(TRUE, bsz) * noise
    fit = fit_perf_params(nodes, replicas, bsz, t_step, t_comp)
    assert 0.005 < fit.median_rel_error < 0.08
    assert fit.max_rel_error >= fit.median_rel_error


def test_fit_pins_what_single_node_points_cannot_identify():
    nodes, replicas, bsz = _grid()
    keep = nodes == 1
    n, k, m = nodes[keep], replicas[keep], bsz[keep]
    fit = fit_perf_params(n, k, m, step_time(TRUE, n, k, m), compute_time(TRUE, m))
    assert fit.median_rel_error < 0.01
    # the prior: crossing nodes is at least 1.1 x slower than staying on one
    assert fit.params.alpha_n >= 1.1 * fit.params.alpha_r * (1 - 1e-9)
    assert fit.params.beta_n >= 1.1 * fit.params.beta_r * (1 - 1e-9)


def test_fit_with_one_batch_size_splits_compute_time_evenly():
    fit = fit_perf_params([1, 1], [1, 1], [32, 32], [0.1, 0.1], [0.1, 0.1])
    assert fit.params.alpha_c == pytest.approx(0.05)
    assert fit.params.beta_c * 32 == pytest.approx(0.05)


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [("step", np.nan, "step_time"), ("comp", -1.0, "compute_time"), ("bsz", 0.0, "local_bsz")],
)
def test_fit_rejects_bad_points(field: str, value: float, match: str):
    nodes, replicas, bsz = _grid()
    t_step = step_time(TRUE, nodes, replicas, bsz)
    t_comp = compute_time(TRUE, bsz).astype(float)
    arrays = {"step": t_step, "comp": t_comp, "bsz": bsz.astype(float)}
    arrays[field][3] = value
    with pytest.raises(ValueError, match=match):
        fit_perf_params(nodes, replicas, arrays["bsz"], arrays["step"], arrays["comp"])
