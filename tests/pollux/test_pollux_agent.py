"""PolluxAgent: online fit from reported times, exploration limit, batch and LR choice, and the
gradient-noise estimators checked on synthetic gradients with a known noise scale."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from goodput import GoodputModel, GradParams, PerfParams, step_time, sync_time
from pollux.agent import (
    AgentState,
    ProfilePoint,
    choose_batch,
    exploration_limit,
    lr_factor,
    model,
    noise_from_consecutive,
    noise_from_replicas,
    observe,
)

TRUE = PerfParams(0.05, 0.004, 0.3, 0.01, 0.05, 0.005, 1.5)
GRAD = GradParams(sqr=1.0, var=4.0)


def _point(nodes: int, gpus: int, bsz: int) -> ProfilePoint:
    t = float(step_time(TRUE, nodes, gpus, bsz))
    return ProfilePoint(nodes, gpus, bsz, t, float(sync_time(TRUE, nodes, gpus)))


def _state(**kw) -> AgentState:
    return AgentState(init_batch_size=32, max_batch_size=1024, local_bsz_bounds=(8, 128), **kw)


def test_before_any_measurement_the_job_starts_at_m0_and_may_double():
    st = _state()
    assert model(st) is None
    assert choose_batch(st, 1, 1) == (32, 0)
    assert choose_batch(st, 1, 8) == (8, 0)  # K x the smallest local batch covers M0
    assert exploration_limit(st) == 1
    st = observe(st, _point(1, 3, 32), GRAD)
    assert exploration_limit(st) == 6


def test_fit_from_reported_times_predicts_unseen_placements():
    st = _state()
    for nodes, gpus, bsz in [
        (1, 1, 32),
        (1, 1, 96),
        (1, 2, 32),
        (1, 4, 64),
        (2, 8, 64),
        (4, 16, 32),
    ]:
        st = observe(st, _point(nodes, gpus, bsz), GRAD)
    m = model(st)
    assert m is not None
    for nodes, gpus, bsz in [(1, 3, 48), (3, 12, 96)]:
        true = float(step_time(TRUE, nodes, gpus, bsz))
        assert float(step_time(m.perf, nodes, gpus, bsz)) == pytest.approx(true, rel=0.1)
    # A repeated configuration is averaged, not added.
    again = observe(st, _point(1, 1, 32))
    assert len(again.points) == len(st.points) and again.points[0].samples == 2


def test_batch_choice_maximises_the_fitted_goodput_and_respects_fixed_batch_jobs():
    st = _state()
    for args in [(1, 1, 32), (1, 1, 128), (1, 4, 64), (2, 8, 64)]:
        st = observe(st, _point(*args), GRAD)
    m = model(st)
    assert m is not None
    local, accum = choose_batch(st, 2, 8)
    best = m.optimize(2, 8, max_batch_size=1024, local_bsz_bounds=(8, 128), accumulation=True)
    assert (local, accum) == (int(best.local_bsz), int(best.accum_steps))
    assert 8 * local * (accum + 1) > 32  # more GPUs, a larger batch than M0
    fixed = observe(_state(adaptive=False), _point(1, 1, 32), GRAD)
    local, accum = choose_batch(fixed, 1, 4)
    assert 4 * local * (accum + 1) == 32


def test_lr_factor_rules():
    assert lr_factor("sqrt", GRAD, 32, 128) == pytest.approx(2.0)
    assert lr_factor("linear", GRAD, 32, 128) == pytest.approx(4.0)
    gain = lr_factor("adascale", GRAD, 32, 128)
    assert gain == pytest.approx((4 + 1) / (4 / 4 + 1))  # (var + sqr) / (var / S + sqr)
    assert 1.0 < gain < 4.0
    assert lr_factor("adascale", GradParams(0.0, 1.0), 32, 128) == pytest.approx(4.0)


def _gradients(rng, true_g, noise_per_sample, batch, count):
    """``count`` mini-batch gradients at ``batch``: true gradient + N(0, Σ/B), Σ = s² I."""
    return true_g + rng.normal(0.0, noise_per_sample / np.sqrt(batch), (count, true_g.size))


def test_noise_scale_estimators_recover_a_known_noise_scale():
    rng = np.random.default_rng(0)
    d = 20_000
    true_g = rng.normal(0, 0.01, d)
    s = 0.2  # per-sample noise std per coordinate: tr(Σ) = d s²
    sqr, trace = float(true_g @ true_g), d * s**2
    phi = trace / sqr
    est = []
    for _ in range(5):
        grads = _gradients(rng, true_g, s, 16, 4)
        gp = noise_from_replicas((grads**2).sum(axis=1), float((grads.mean(0) ** 2).sum()), 16, 32)
        est.append(gp.noise_scale(32))
    assert np.median(est) == pytest.approx(phi, rel=0.1)
    g1, g2 = _gradients(rng, true_g, s, 64, 2)
    gp = noise_from_consecutive(g1, g2, 64, 32)
    assert gp.noise_scale(32) == pytest.approx(phi, rel=0.15)
    with pytest.raises(ValueError):
        noise_from_replicas(np.array([1.0]), 1.0, 16, 32)


def test_agent_state_round_trips_through_json():
    st = observe(observe(_state(), _point(1, 1, 32), GRAD), _point(1, 2, 32))
    assert AgentState.from_json(st.to_json()) == st
    assert isinstance(model(st), GoodputModel)
    # every field of a profile point, by name (a field added later must be journaled too)
    assert [p.to_json() for p in st.points] == [dataclasses.asdict(p) for p in st.points]
